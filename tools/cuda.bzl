"""CUDA build macros (no rules_cuda offline): .cu files compile with nvcc in a genrule.

@local_cuda (tools/cuda_configure.bzl) says at configure time whether a toolkit was found
(CUDA_PATH, else /usr/local/cuda). Where found, `cuda_library` compiles each .cu to an object
for sm_90 plus compute_90 PTX (H100/H200; the PTX lets newer GPUs JIT it), and wraps the
objects with the C++ sources in a cc_library that links cudart statically plus cuBLAS and
NCCL (shared: NCCL ships no static library here). Where not found, `cuda_library` builds the
`fallback_srcs` instead (a stub that says the build has no CUDA), so everything else builds.
"""

load("@local_cuda//:defs.bzl", "CUDA_FOUND", "CUDA_PATH")
load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

# sm_90 SASS for H100/H200 plus compute_90 PTX for anything newer.
NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler",
    "-fPIC",
    "-I.",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-gencode",
    "arch=compute_90,code=compute_90",
    # The kernels must round like the host code (no FMA contraction), see kernels/moe_kernels.h.
    "-fmad=false",
]

def if_cuda(with_cuda, without_cuda = []):
    """`with_cuda` when the toolkit was found at configure time, else `without_cuda`."""
    return with_cuda if CUDA_FOUND else without_cuda

def cuda_library(name, cu_srcs = [], cu_hdrs = [], cu_deps_hdrs = [], srcs = [], hdrs = [], deps = [], fallback_srcs = [], fallback_hdrs = [], fallback_deps = [], copts = [], **kwargs):
    """A cc_library whose .cu sources compile with nvcc (see the module doc).

    cu_hdrs: headers of this library the .cu files include; cu_deps_hdrs: other packages'
    exported headers they include (inputs of the nvcc genrule). Without CUDA the library is
    fallback_srcs / fallback_hdrs / fallback_deps (empty by default).
    """
    if not CUDA_FOUND:
        cc_library(name = name, srcs = fallback_srcs, hdrs = fallback_hdrs, deps = fallback_deps, copts = copts, **kwargs)
        return
    objs = []
    for src in cu_srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", "") + "_cu"
        native.genrule(
            name = obj,
            srcs = [src] + cu_hdrs + cu_deps_hdrs,
            outs = [obj + ".o"],
            cmd = "%s/bin/nvcc %s -c $(location %s) -o $@" % (CUDA_PATH, " ".join(NVCC_FLAGS), src),
            message = "nvcc " + src,
        )
        objs.append(":" + obj)
    cc_library(
        name = name,
        srcs = srcs + objs,
        hdrs = hdrs + cu_hdrs,
        deps = deps + ["@local_cuda//:cuda"],
        copts = copts,
        # Static only: cudart is linked statically into the final binary, whose symbols a
        # shared library of these objects (tests link dynamically by default) could not see.
        linkstatic = True,
        **kwargs
    )

def cuda_cc_test(name, **kwargs):
    """A cc_test built only where CUDA was found (GPU tests skip themselves without a GPU)."""
    if CUDA_FOUND:
        cc_test(name = name, **kwargs)

def cuda_cc_binary(name, **kwargs):
    """A cc_binary built only where CUDA was found (GPU benchmarks)."""
    if CUDA_FOUND:
        cc_binary(name = name, **kwargs)
