"""Shared compiler options for dockyard targets."""
DOCKYARD_COPTS = ["-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter", "-O2"]
