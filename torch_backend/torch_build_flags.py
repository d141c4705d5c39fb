"""Prints what Meson needs to build against the torch that this Python imports, one item a line:
version, include directories (';'-separated), library directory, the C++ ABI flag, CUDA version
('' for a CPU build). Reading them from the installed torch, not from fixed paths, is what lets
one build serve torch from pip, a virtual environment or a distribution package."""
import os
import sys

import torch
import torch.utils.cpp_extension as extension

root = os.path.dirname(torch.__file__)
includes = extension.include_paths()
print(torch.__version__.split("+")[0])
print(";".join(includes))
print(os.path.join(root, "lib"))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.version.cuda or "")
sys.stdout.flush()
