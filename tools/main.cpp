// attnprof: the command line. Each subcommand lives in its own tools/cmd_<name>.cpp and defines
// `void add_<name>_command(CLI::App&)`; adding one is one line in ATTNPROF_COMMANDS below.
//
// Errors: every attnprof::Error (bad input, unwritable output, a corrupt .npy...) and every command-line
// parse error ends the process with exit code 2 and one line on stderr, "attnprof: error: ...".
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "attnprof/allocator.h"
#include "attnprof/error.h"
#include "attnprof/report.h"
#include "common.h"

#define ATTNPROF_COMMANDS(X) X(profile) X(compare) X(sweep) X(roofline) X(report) X(diff)

namespace attnprof::cli {
#define ATTNPROF_DECLARE_COMMAND(name) void add_##name##_command(CLI::App& app);
ATTNPROF_COMMANDS(ATTNPROF_DECLARE_COMMAND)
#undef ATTNPROF_DECLARE_COMMAND
}  // namespace attnprof::cli

namespace {

int fail(const std::string& msg) {
  attnprof::cli::remove_created_dirs_if_empty();
  attnprof::cli::print_error(msg);
  return 2;
}

// Ctrl-C (or a kill) in the middle of a run: the files written so far wait in temporary files for the run's
// end, and the --out directory may be new. Remove both, then die of the signal as the shell expects
// (exit status 128 + signal; SIGQUIT and SIGXCPU with their core dump, where core dumps are enabled).
// The --peer torch interpreter, in a process group of its own, is killed with it. Everything here is
// async-signal-safe: lock-free atomics, write, unlink, rmdir, kill, sigaction, raise. Where it returns (a
// signal deferred, sweep's first Ctrl-C), the interrupted code's errno is as it was.
extern "C" void on_terminating_signal(int sig) {
  const int saved_errno = errno;
  // A run whose files are being renamed into place finishes that first: all new, never half new.
  // sweep's first Ctrl-C: stop after the point in progress and write those that finished.
  if (attnprof::report::defer_signal_while_committing(sig) || attnprof::cli::take_signal_gracefully(sig)) {
    errno = saved_errno;
    return;
  }
  attnprof::report::remove_temporary_files();
  attnprof::cli::remove_created_dirs_on_signal();
  attnprof::cli::kill_peer_on_signal();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

// Every signal whose default action ends the process and that reaches it from outside, or from what it writes
// to: Ctrl-C, Ctrl-\ (SIGQUIT), kill and job schedulers (SIGTERM, SIGHUP when the terminal goes; SIGUSR1/2,
// which Slurm and `timeout -s` send before a time limit), timers a parent left armed across exec (SIGALRM,
// SIGVTALRM, SIGPROF: interval timers survive execve), a CPU-time limit (SIGXCPU, `ulimit -t`: the hard limit's
// SIGKILL follows, so the run must stop now, not ignore it), and SIGPIPE: stdout is written only once the
// files are in place (dying of it there, as `attnprof compare | head -1` does, leaves them whole), but
// progress goes to stderr during the run, and a FIFO output is written through, so a reader that goes away
// mid-run raises it while temporary files wait. Not handled: the faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT, SIGTRAP, SIGSYS), which mean the process is broken and belong to a debugger or a sanitizer's
// report; SIGXFSZ, ignored below; real-time signals and SIGIO/SIGPWR/SIGSTKFLT, which nothing sends a
// command-line tool.
constexpr int kTerminatingSignals[] = {SIGINT,  SIGTERM,   SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2,
                                       SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGPIPE};

void install_signal_cleanup() {
  struct sigaction sa {};
  sa.sa_handler = on_terminating_signal;
  // A signal the handler takes and returns from (sweep's first Ctrl-C, one deferred while files are renamed)
  // must not fail the system call it interrupted: restarted, as most calls allow.
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kTerminatingSignals) {
    struct sigaction old {};
    // Only a signal at its default action: one the parent set to be ignored (nohup's SIGHUP, a background
    // job's SIGINT, a SIGPIPE a daemon ignores) stays ignored, and a handler installed before main (a sampling
    // profiler's SIGPROF, preloaded) stays in place.
    if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
    ::sigaction(sig, &sa, nullptr);
  }
  // Past a file size limit (ulimit -f) the kernel sends SIGXFSZ, whose default action kills the process with
  // no message and its temporary files left behind. Ignored, the write fails with EFBIG instead, and the
  // error path runs: one line naming the file, exit 2, nothing half written.
  ::signal(SIGXFSZ, SIG_IGN);
}

// exit() called by a library in the middle of a run (libgomp's "Thread creation failed", for one, under an
// OMP_STACKSIZE or GOMP_CPU_AFFINITY it cannot follow, prints its line and exits with 1, attnprof's code for a
// validation failure): the temporary files, the new --out and the peer go as on a signal, one line says what
// happened, and the exit code is 2.
extern "C" void on_unplanned_exit() {
  if (attnprof::cli::exit_was_planned()) return;
  attnprof::report::remove_temporary_files();
  attnprof::cli::remove_created_dirs_on_signal();
  attnprof::cli::kill_peer_on_signal();
  std::fflush(stdout);
  std::fputs("attnprof: error: a library attnprof runs on ended the run (its message is above; OpenMP's libgomp, "
             "for one, stops a program whose OMP_* or GOMP_* settings it cannot follow); its unfinished files were removed\n",
             stderr);
  ::_exit(2);
}

int run_command(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  install_signal_cleanup();
  std::atexit(on_unplanned_exit);
  const int code = run_command(argc, argv);
  attnprof::cli::exit_as_planned(code);
}

namespace {

int run_command(int argc, char** argv) {
  CLI::App app{"attnprof: profile causal attention the ways practitioners write it (naive, in-place, SDPA, "
               "FlashAttention) and see why each is fast or slow",
               "attnprof"};
  app.set_version_flag("--version", std::string("attnprof ") + ATTNPROF_VERSION);
  app.footer(
      "attnprof help COMMAND (or attnprof COMMAND --help) gives a command's options; docs/cli.md gives them all.\n"
      "Environment:\n"
      "  ATTNPROF_ISA=scalar|avx2|avx512  the SIMD target of attnprof's own kernels (default: the CPU's best);\n"
      "                                   OpenBLAS and oneDNN choose their own\n"
      "  OMP_NUM_THREADS, OMP_THREAD_LIMIT  the threads without --threads, as OpenMP and PyTorch read them\n"
      "  XDG_CACHE_HOME, HOME             where the measured machine peaks are cached\n"
      "                                   ($XDG_CACHE_HOME/attnprof/peaks.json, else ~/.cache/attnprof/peaks.json)\n"
      "  ATTNPROF_WEB_DIR                 the chart library's directory for report and --html\n"
      "  ATTNPROF_OPENBLAS_LIBRARY, ATTNPROF_CUBLAS_LIBRARY, ATTNPROF_CUDNN_LIBRARY\n"
      "                                   a library file to load instead of the one found by name");
  app.require_subcommand(1);
  app.fallthrough(false);
#define ATTNPROF_ADD_COMMAND(name) attnprof::cli::add_##name##_command(app);
  ATTNPROF_COMMANDS(ATTNPROF_ADD_COMMAND)
#undef ATTNPROF_ADD_COMMAND
  // An option given an empty value (--memory-budget "", --save "") is a mistake, never "the default".
  const CLI::Validator non_empty([](std::string& s) { return s.empty() ? std::string("an empty value") : std::string(); },
                                 "", "non-empty");
  for (CLI::App* sub : app.get_subcommands({})) {
    // "attnprof profile --version" answers as "attnprof --version" does, before a missing variant is named.
    sub->set_version_flag("--version", std::string("attnprof ") + ATTNPROF_VERSION);
    for (CLI::Option* opt : sub->get_options()) {
      // A flag given a value (--causal=false, --json=0) is refused rather than read one way by one flag and
      // ignored by another: --causal=false used to leave the mask on. "--flag=true" still means the flag.
      if (opt->get_items_expected_max() == 0) {
        opt->disable_flag_override();
        // A flag given twice (--json --json) is refused as an option given twice is: the same slip, most
        // often a command line put together from two.
        if (opt != sub->get_help_ptr() && opt != sub->get_version_ptr())
          opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);
      }
      if (opt->get_items_expected_min() > 0) {
        // Every integer option reads plain decimal in its range (add_integer_option); one added without it
        // still gets the decimal form, within 64 bits.
        const std::string type = opt->get_type_name();
        bool checked = false;
        try {
          checked = opt->get_validator(attnprof::cli::kDecimalCheck) != nullptr;
        } catch (const CLI::OptionNotFound&) {
        }
        if ((type == "INT" || type == "UINT") && !checked)
          opt->check(attnprof::cli::decimal_check(opt->get_name(), std::numeric_limits<int64_t>::min(),
                                                  std::numeric_limits<uint64_t>::max()));
        opt->check(non_empty);
      }
    }
  }
  // CLI11 answers both a missing and a misspelt command with "A subcommand is required"; name the commands.
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  const std::string commands = fmt::format("{}", fmt::join(names, ", "));
  // `attnprof help` and `attnprof help CMD`, as git and pip answer them: the help `--help` prints.
  std::vector<char*> args(argv, argv + argc);
  static char help_flag[] = "--help";
  if (argc >= 2 && std::string_view(argv[1]) == "help") {
    if (argc > 3) return fail("help takes at most one command: attnprof help [" + commands + "]");
    // `help help`, `help -h` and `help --help` are the top-level help.
    const std::string_view of = argc == 3 ? argv[2] : "";
    const bool top = of.empty() || of == "help" || of == "-h" || of == "--help";
    if (!top && std::find(names.begin(), names.end(), of) == names.end())
      return fail("unknown command '" + std::string(of) + "'" + attnprof::did_you_mean(of, names) +
                  ": expected one of " + commands + " (see attnprof --help)");
    args = top ? std::vector<char*>{argv[0], help_flag} : std::vector<char*>{argv[0], argv[2], help_flag};
    argc = int(args.size());
  }
  argv = args.data();
  const std::string first = argc > 1 ? argv[1] : "";
  const bool known = std::find(names.begin(), names.end(), first) != names.end();
  std::vector<std::string> with_help = names;  // what a near miss may have meant: `helpp` is `help`
  with_help.push_back("help");
  if (argc < 2) return fail("a command is required: " + commands + " (see attnprof --help)");
  if (!known && first != "-h" && first != "--help" && first != "--version")
    return fail(first.starts_with('-') ? "unknown option '" + first + "' before the command: expected one of " + commands +
                                             " (options go after it; see attnprof --help)"
                                       : "unknown command '" + first + "'" + attnprof::did_you_mean(first, with_help) +
                                             ": expected one of " + commands + " (see attnprof --help)");
  // "--out=" is an empty value too, but CLI11 reads it as "--out" and takes the next argument as its value: the
  // rest of the line would then be silently misread (--out= --json wrote a directory named --json).
  if (known) {
    const CLI::App* sub = app.get_subcommand(first);
    for (int i = 2; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "--") break;
      if (a.size() > 3 && a.starts_with("--") && a.find('=') == a.size() - 1) {
        const std::string name(a.substr(0, a.size() - 1));
        if (const CLI::Option* opt = sub->get_option_no_throw(name); opt != nullptr && opt->get_items_expected_min() > 0)
          return fail(name + ": an empty value (see attnprof " + first + " --help)");
      }
    }
  }
  try {
    app.parse(argc, argv);  // the chosen subcommand runs in its callback
  } catch (const CLI::CallForHelp& e) {  // help and version go to stdout, which may be full as well
    return attnprof::cli::stdout_status(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return attnprof::cli::stdout_status(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return attnprof::cli::stdout_status(app.exit(e));
  } catch (const CLI::ExtrasError& e) {
    // CLI11 lists every left-over argument, last first; name the first unknown option (or stray value).
    for (const CLI::App* sub : app.get_subcommands()) {
      const std::vector<std::string> extra = sub->remaining(false);
      if (extra.empty()) continue;
      auto opt = std::find_if(extra.begin(), extra.end(), [](const std::string& a) {
        return a.size() > 1 && a[0] == '-' && !(a[1] >= '0' && a[1] <= '9');
      });
      const std::string name = sub->get_name();
      if (opt != extra.end())
        return fail(name + " does not take " + opt->substr(0, opt->find('=')) + " (see attnprof " + name + " --help)");
      return fail(name + " does not take the extra argument '" + extra.front() + "' (see attnprof " + name +
                  " --help)");
    }
    return fail(std::string(e.what()) + " (see attnprof --help)");
  } catch (const CLI::ArgumentMismatch& e) {
    // A flag given a value: CLI11 says "causal was given a disallowed flag override"; name the argument.
    const CLI::App* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front();
    for (int i = 2; sub && std::string_view(e.what()).ends_with("disallowed flag override") && i < argc; ++i) {
      const std::string arg = argv[i], name = arg.substr(0, arg.find('='));
      const CLI::Option* opt = name.size() < arg.size() ? sub->get_option_no_throw(name) : nullptr;
      if (!opt || opt->get_items_expected_max() != 0 || arg.ends_with("=true")) continue;
      const std::string hint = name == "--causal"      ? ": for no mask give --no-causal"
                               : name == "--no-causal" ? ": the mask is on unless it is given"
                                                       : "";
      return fail(name + " takes no value, got '" + arg + "'" + hint + " (see attnprof " + sub->get_name() + " --help)");
    }
    // A single-value option or a flag given twice: name it rather than "At Most 1 required but received 2".
    for (const CLI::App* sub : app.get_subcommands())
      for (const CLI::Option* opt : sub->get_options())
        if (opt->get_items_expected_max() <= 1 && opt->count() > 1)
          return fail(opt->get_name() + " was given more than once (see attnprof " + sub->get_name() + " --help)");
    return fail(std::string(e.what()) + " (see attnprof --help)");
  } catch (const CLI::ParseError& e) {
    // A missing argument of a command ("variant is required") points at that command's help.
    const std::vector<CLI::App*> chosen = app.get_subcommands();
    return fail(std::string(e.what()) + " (see attnprof " + (chosen.empty() ? "" : chosen.front()->get_name() + " ") +
                "--help)");
  } catch (const attnprof::Error& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    // Not a tensor's (the tracked allocator names its own size and the tensors live): a buffer of the fp64
    // reference or of a report, whose size the C++ runtime does not pass on (and the tensors beside it are
    // freed by the time it lands here). Under an address-space limit the limit, not free memory, is the
    // likely cause: named with its size. diff and report run nothing: what they hold is the files they read.
    const std::vector<CLI::App*> ran = app.get_subcommands();
    const std::string command = ran.empty() ? "" : ran.front()->get_name();
    if (command == "diff" || command == "report") {
      const int64_t limit = attnprof::address_space_limit_bytes();
      return fail(fmt::format("out of memory: the files {} reads, parsed, needed more memory than {}; give it smaller "
                              "files (a run of fewer --iters writes smaller summaries and traces)",
                              command,
                              limit >= 0 ? fmt::format("the address-space limit (ulimit -v) of {} MiB allows", limit >> 20)
                                         : std::string("the system gave")));
    }
    if (const int64_t limit = attnprof::address_space_limit_bytes(); limit >= 0)
      return fail("out of memory: an allocation outside the tensors (the fp64 reference's or a report's buffers) "
                  "failed under the address-space limit (ulimit -v) of " + std::to_string(limit >> 20) +
                  " MiB; raise it, or try a smaller --shape or fewer --threads");
    return fail("out of memory: the system refused an allocation outside the tensors (the fp64 reference's or a "
                "report's buffers: a ulimit, or less free memory than the run needs); try a smaller --shape or a "
                "--memory-budget under what is free");
  } catch (const std::exception& e) {
    attnprof::cli::remove_created_dirs_if_empty();
    std::fflush(stdout);
    attnprof::cli::print_err("attnprof: internal error: {}\n", attnprof::cli::terminal_line(e.what()));
    return 2;  // 1 means a validation failure; anything that stops a run early is 2
  }
  return attnprof::cli::stdout_status(0);
}

}  // namespace
