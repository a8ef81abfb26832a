#!/usr/bin/env bash
# Browser test of the HTML report (docs/report.md): builds report.html with `attnprof report` from the
# hand-made fixtures (tests/fixtures/report, every section present), from the hand-made CUDA fixtures
# (tests/fixtures/report-cuda, a GPU compare), with hostile names, from a small real
# compare + sweep + roofline run and from two profiles alone, then loads each page from file:// in Debian's headless Chromium through
# playwright-core (tests/browser/report.spec.mjs) and checks it. Screenshots land in tests/browser/out/.
#
#   tests/browser/run.sh [BUILD_DIR]        # default: build
#
# Environment: CHROMIUM (default /usr/bin/chromium); ATTNPROF_BROWSER_REAL=0 skips the real run;
# ATTNPROF_REQUIRE_BROWSER=1 turns a missing Chromium/Node into a failure instead of a skip (for CI).
# Exit status: 0 when every check passed (or the test was skipped), 1 otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
[[ $build = /* ]] || build=$root/$build
bin=$build/tools/attnprof
chromium=${CHROMIUM:-/usr/bin/chromium}

skip() {
  if [[ ${ATTNPROF_REQUIRE_BROWSER:-0} == 1 ]]; then echo "browser test: FAILED: $*"; exit 1; fi
  echo "browser test: SKIPPED: $*"
  exit 0
}
[[ -x $chromium ]] || skip "no Chromium at $chromium (apt-get install chromium, or scripts/setup.sh)"
command -v node >/dev/null || skip "no node (apt-get install nodejs npm)"
[[ -x $bin ]] || { echo "browser test: FAILED: $bin is not built (cmake --build $build)"; exit 1; }

# The chart library the page inlines, and playwright-core: exact versions from the lock files.
for dir in web tests/browser; do
  if [[ ! -d $root/$dir/node_modules ]]; then
    echo "browser test: npm ci in $dir"
    (cd "$root/$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done

out=$root/tests/browser/out
rm -rf "$out"
mkdir -p "$out/fixtures"
fail=0

echo "== report from the fixtures"
cp "$root"/tests/fixtures/report/*.json "$root"/tests/fixtures/report/*.txt "$out/fixtures/"
"$bin" report --out "$out/fixtures" >/dev/null
node "$root/tests/browser/report.spec.mjs" "$out/fixtures/report.html" "$out/fixtures.png" || fail=1

echo "== report from the CUDA fixtures (a GPU run's page: device time, GPU roofline, device memory)"
mkdir -p "$out/cuda"
cp "$root"/tests/fixtures/report-cuda/*.json "$out/cuda/"
"$bin" report --out "$out/cuda" >/dev/null
node "$root/tests/browser/report.spec.mjs" "$out/cuda/report.html" "$out/cuda.png" || fail=1

echo "== report with hostile names (escaping, in the browser)"
mkdir -p "$out/hostile"
cp "$root"/tests/fixtures/report/*.json "$root"/tests/fixtures/report/*.txt "$out/hostile/"
node --input-type=module - "$out/hostile" <<'JS'
import fs from 'node:fs';
const dir = process.argv[2];
const evil = `x</script><script>alert(1)</script><img src=x onerror=alert(2)>&amp;"'\u2028`;
const edit = (f, fn) => { const j = JSON.parse(fs.readFileSync(`${dir}/${f}`)); fn(j); fs.writeFileSync(`${dir}/${f}`, JSON.stringify(j)); };
edit('compare.json', (j) => { j.variants[0].name = evil; j.variants[0].summary = 'evil.summary.json'; j.variants[0].trace = `e<v>"'&.trace.json`; });
edit('naive.summary.json', (j) => { j.rows[2].name = evil; });
fs.renameSync(`${dir}/naive.summary.json`, `${dir}/evil.summary.json`);
fs.writeFileSync(`${dir}/e<v>"'&.trace.json`, '{"traceEvents":[]}');
edit('sweep.json', (j) => { j.points[0].variant = evil; j.fits[0].variant = evil; });
edit('roofline.json', (j) => { j.ops[0].variant = evil; j.ops[0].name = evil; });
JS
"$bin" report --out "$out/hostile" --title "run <b>\"1\"</b><script>alert(3)</script>" >/dev/null
node "$root/tests/browser/report.spec.mjs" "$out/hostile/report.html" "$out/hostile.png" || fail=1

if [[ ${ATTNPROF_BROWSER_REAL:-1} == 1 ]]; then
  echo "== report from a small real run"
  real=$out/real
  common=(--threads 2 --warmup 1)
  "$bin" compare --shape 1,4,256,64 "${common[@]}" --out "$real" >/dev/null 2>"$out/compare.log" \
    || { echo "browser test: attnprof compare failed:"; cat "$out/compare.log"; exit 1; }
  "$bin" sweep --seq 128..512 --variants naive,flash --shape 1,4,256,64 "${common[@]}" --out "$real" \
    >/dev/null 2>"$out/sweep.log" || { echo "browser test: attnprof sweep failed:"; cat "$out/sweep.log"; exit 1; }
  "$bin" roofline --shape 1,4,256,64 "${common[@]}" --out "$real" >/dev/null 2>"$out/roofline.log" \
    || { echo "browser test: attnprof roofline failed:"; cat "$out/roofline.log"; exit 1; }
  "$bin" report --out "$real" >/dev/null
  node "$root/tests/browser/report.spec.mjs" "$real/report.html" "$out/real.png" || fail=1

  echo "== report from profiles alone (no compare.json: the roofline under the peaks the summaries recorded)"
  profiles=$out/profiles
  for v in naive flash; do
    "$bin" profile "$v" --shape 1,4,256,64 "${common[@]}" --out "$profiles" >/dev/null 2>"$out/profile.log" \
      || { echo "browser test: attnprof profile $v failed:"; cat "$out/profile.log"; exit 1; }
  done
  "$bin" report --out "$profiles" >/dev/null
  grep -q '"kind":"roofline"' "$profiles/report.html" \
    || { echo "browser test: the profiles' page has no roofline chart"; fail=1; }
  node "$root/tests/browser/report.spec.mjs" "$profiles/report.html" "$out/profiles.png" || fail=1
fi

if ((fail)); then echo "browser test: FAILED (screenshots in $out)"; exit 1; fi
echo "browser test: passed (screenshots in $out)"
