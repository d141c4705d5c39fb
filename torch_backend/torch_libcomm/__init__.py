"""libcomm as a torch.distributed backend.

Importing this package registers the backend "libcomm" for CPU and CUDA tensors, so that

    dist.init_process_group("libcomm")                # or "cpu:libcomm,cuda:nccl"

runs torch.distributed's collectives on libcomm. Installed with pip, torch imports it by itself
(the "torch.backends" entry point; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off).

Recovery from a dead rank (docs/recovery.md): torch.distributed.shrink_group works on libcomm
groups; `shrink()` here needs no list of the dead (the survivors agree on it), and `grow()`
takes new processes into the default group (they join with init_process_group when COMM_JOIN
is set, as commrun --restart sets it).
"""

import sys

import torch  # loads the torch libraries that the extension links against
import torch.distributed as _distributed

from torch_libcomm import _C

__all__ = ["register", "shrink", "grow", "dump_trace"]


def register() -> None:
    """Registers the backend "libcomm" with torch.distributed (once; again is a no-op)."""
    if not _distributed.is_available():
        return
    if not hasattr(_distributed.Backend, "LIBCOMM"):
        _distributed.Backend.register_backend(
            "libcomm", _create, extended_api=True, devices=["cpu", "cuda"]
        )


def _create(backend_options, pg_options):
    """torch's creator of a "libcomm" backend (extended API): the backend, or, where torch is making
    a group whose every device runs libcomm, the whole process group around it."""
    backend = _C._create(backend_options, pg_options)
    return _whole_group(backend, sys._getframe(1)) or backend


def _whole_group(backend, caller):
    """torch names a plugin's backend "custom" in its process groups (ProcessGroup::getBackendName
    knows only its own backends), and DDP's logger records that, where dist.get_backend() says
    "libcomm". torch takes a process group from a creator as the group itself; so when it is
    making a group (torch 2.13's _new_process_group_helper, `caller`) whose every device runs
    libcomm, this makes the group torch would have made, registered the same way, as one that
    names its backend "libcomm". None otherwise, and where torch would wrap the backend for
    TORCH_DISTRIBUTED_DEBUG=DETAIL: torch then makes the group as for any plugin."""
    c10d = _distributed.distributed_c10d
    if caller.f_code.co_name != "_new_process_group_helper":
        return None
    scope = caller.f_locals
    config, store, made = scope.get("backend_config"), scope.get("prefix_store"), scope.get("pg")
    if config is None or store is None or made is None:
        return None
    devices = config.get_device_backend_map()
    if set(devices.values()) != {"libcomm"} or c10d.get_debug_level() == c10d.DebugLevel.DETAIL:
        return None
    return _libcomm_process_group(store, made.rank(), made.size(), backend, devices, made.bound_device_id)


def _libcomm_process_group(store, rank, size, backend, devices, bound_device_id=None):
    """A torch process group of one libcomm backend for `devices`, naming its backend "libcomm"."""
    pg = _C._process_group(store, rank, size)
    pg.bound_device_id = bound_device_id
    backend_type = _distributed.ProcessGroup.BackendType.CUSTOM
    for device in devices:
        pg._register_backend(torch.device(device), backend_type, backend)
    pg._set_default_backend(backend_type)
    return pg


def dump_trace(dir=None) -> str:
    """Writes this process's flight recorder (its recent libcomm calls; COMM_TRACE entries) into
    `dir` (None: COMM_TRACE_DIR, else $TMPDIR or /tmp) as comm_trace_rank<R>.json and returns
    the file's path. `python -m torch_libcomm.fr_convert` turns a folder of them into the files
    torch's own analyzer reads (docs/debugging.md)."""
    return _C._dump_trace(dir or "")


def shrink(ranks_to_exclude=None, group=None):
    """Shrinks `group` (the default group unless given) to its live ranks and returns the new
    group. Every survivor calls it (the dead never do); they agree on who is out: the ranks in
    `ranks_to_exclude` (the same list on every caller) and every rank found dead, even one dying
    during the call. Ranks are numbered densely in the old order. As with shrink_group, a shrunk
    default group becomes the default group and the other groups are destroyed."""
    c10d = _distributed.distributed_c10d
    old = group if group is not None else c10d._get_default_group()
    is_default = old == c10d._get_default_group()
    backend, survivors = _C._shrink(old._get_backend(torch.device("cpu")), list(ranks_to_exclude or []))
    if is_default:
        mapping = {rank: rank for rank in range(len(survivors))}  # the new world numbers its own
    else:
        members = c10d.get_process_group_ranks(old)  # global ranks, in the group's order
        mapping = {members[old_rank]: new_rank for new_rank, old_rank in enumerate(survivors)}
    return _replace_group(old, is_default, backend, mapping, "shrunk")


def grow(count, group=None):
    """Grows the default group by `count` new processes and returns the grown group, which
    becomes the default group (the others are destroyed). Every member calls it with the same
    count; each newcomer calls init_process_group("libcomm", rank=R, world_size=N) with COMM_JOIN
    set to the group's libcomm name ("default_pg"), R from the old size on, N the new size. The
    members keep their ranks. Through the job's store, which must still be up: host it outside
    the ranks (torchrun's agent store, TORCHELASTIC_USE_AGENT_STORE) when rank 0 may die."""
    c10d = _distributed.distributed_c10d
    default = c10d._get_default_group()
    if group is not None and group != default:
        raise ValueError("torch_libcomm.grow: only the default group grows (newcomers join the world)")
    backend = _C._grow(default._get_backend(torch.device("cpu")), int(count))
    mapping = {rank: rank for rank in range(backend.size())}
    return _replace_group(default, True, backend, mapping, "grown")


def _replace_group(old, is_default, backend, mapping, how):
    """Makes a torch process group of a libcomm backend that replaces `old`, as torch's
    shrink_group does (torch 2.13's internals: this package is built against the torch it runs
    with)."""
    c10d = _distributed.distributed_c10d
    if is_default:
        c10d._destroy_all_other_groups(exclude_group=old)
    backend_name, store = c10d._world.pg_map[old]
    config = c10d._world.pg_backend_config.get(old, "")
    old_name = c10d._get_process_group_name(old)
    name = c10d._process_group_name(list(mapping), use_hashed_name=True)
    c10d._cleanup_original_group(old, is_default)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    pg = _libcomm_process_group(c10d.PrefixStore(f"{name}/", store.clone()), backend.rank(), backend.size(), backend,
                                devices)
    pg._set_group_name(name)
    pg._set_group_desc("default:" + how if is_default else old_name + ":" + how)
    if is_default:
        c10d._update_default_pg(pg)
    c10d._register_pg_in_world(pg=pg, backend_name=backend_name, store=store, group_name=name, backend_config=config,
                               rank_mapping=mapping)
    return pg


def _autoload() -> None:
    """torch's entry point ("torch.backends"): importing the package registers the backend."""


register()
