# CUDA backend switch: AUTO builds it when nvcc is found, ON requires it, OFF skips it.
# Sets ATTNPROF_HAVE_CUDA (used by src/cuda/CMakeLists.txt) and enables the CUDA language when on.
set(ATTNPROF_HAVE_CUDA OFF)
# sm_80 (A100) and sm_90a (H100 with its arch-specific features) only: nvcc is slow on CI's 2 cores.
set(ATTNPROF_CUDA_ARCHITECTURES "80;90a" CACHE STRING "CUDA architectures of the CUDA backend's kernels")
if(NOT ATTNPROF_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(ATTNPROF_HAVE_CUDA ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES ${ATTNPROF_CUDA_ARCHITECTURES})
    endif()
    enable_language(CUDA)
  elseif(ATTNPROF_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ATTNPROF_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "attnprof: CUDA backend ${ATTNPROF_HAVE_CUDA}")

# nvcc's settings for the backend's kernels, given to the kernel library (src/cuda) and to the PTX builds
# of the same sources that tests/test_cuda_codegen.cpp reads, so that the test sees what the library ships.
function(attnprof_cuda_kernel_settings target)
  set_target_properties(${target} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
endfunction()

# cuDNN 9 for the sdpa-cudnn variant (src/cuda/cudnn_sdpa.cpp): its headers at build time; the library is
# loaded at run time (dlopen), so no binary needs libcudnn to start. Looked for in the CUDA toolkit first,
# then CUDNN_ROOT and the system paths. Sets ATTNPROF_HAVE_CUDNN, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY.
option(ATTNPROF_CUDNN "Build the sdpa-cudnn variant when cuDNN 9 is found (CUDA builds only)" ON)
set(ATTNPROF_HAVE_CUDNN OFF)
if(ATTNPROF_HAVE_CUDA AND ATTNPROF_CUDNN)
  find_package(CUDAToolkit QUIET)
  find_path(CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDNN_ROOT}/include
    PATH_SUFFIXES x86_64-linux-gnu)
  find_library(CUDNN_LIBRARY NAMES libcudnn.so.9 cudnn
    HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{CUDNN_ROOT}/lib $ENV{CUDNN_ROOT}/lib64
    PATH_SUFFIXES lib lib64 x86_64-linux-gnu)
  set(cudnn_major "")
  foreach(h cudnn_version.h cudnn.h)
    if(CUDNN_INCLUDE_DIR AND EXISTS ${CUDNN_INCLUDE_DIR}/${h} AND NOT cudnn_major)
      file(STRINGS ${CUDNN_INCLUDE_DIR}/${h} cudnn_major REGEX "^#define CUDNN_MAJOR [0-9]+")
      string(REGEX REPLACE "^#define CUDNN_MAJOR ([0-9]+).*" "\\1" cudnn_major "${cudnn_major}")
    endif()
  endforeach()
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND cudnn_major STREQUAL "9" AND EXISTS ${CUDNN_INCLUDE_DIR}/cudnn_graph.h)
    set(ATTNPROF_HAVE_CUDNN ON)
  endif()
  message(STATUS "attnprof: cuDNN ${ATTNPROF_HAVE_CUDNN} (headers: ${CUDNN_INCLUDE_DIR}, major '${cudnn_major}', "
                 "library: ${CUDNN_LIBRARY})")
endif()
