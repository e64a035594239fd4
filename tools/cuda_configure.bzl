"""Detects a CUDA toolkit at configure time (CUDA_PATH, else /usr/local/cuda).

Creates @local_cuda with:
  :defs.bzl  CUDA_FOUND (bool), CUDA_PATH (string)
  :cuda      cc_library with the toolkit headers and cudart/cublas/nccl link flags
             (empty library when CUDA is absent, so nothing that is not CUDA breaks).
Nothing under //planner or //cli:dockyard-plan depends on it.
"""

def _cuda_configure_impl(ctx):
    path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    found = ctx.path(path + "/bin/nvcc").exists and ctx.path(path + "/include/cuda_runtime.h").exists
    ctx.file("WORKSPACE", "")
    ctx.file("defs.bzl", "CUDA_FOUND = %s\nCUDA_PATH = %r\n" % ("True" if found else "False", path))
    if found:
        ctx.symlink(path + "/include", "include")
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "cuda",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"]),
    includes = ["include"],
    linkopts = ["-L{p}/lib64", "-lcudart_static", "-lcublas", "-lnccl", "-ldl", "-lrt", "-lpthread",
                "-Wl,-rpath,{p}/lib64"],
)
""".format(p = path))
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda")
""")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
