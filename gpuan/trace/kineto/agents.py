"""ROCm Kineto traces number GPUs by HSA agent, not by device index: which agent is which device.

roctracer (the tracer under Kineto on ROCm) gives each kernel, copy and fill the id of its HSA agent. The
agents are the host's CPUs first (one per NUMA node / socket), then the GPUs, so the first GPU of a
two-socket host is agent 2 and its eighth is agent 9; ``deviceProperties`` lists the GPUs by device index
0..n-1. The trace does not record how many CPU agents came first, so the mapping takes the best evidence
the trace has, in this order:

1. ``[memory]`` events name the framework's device (``Device Type`` HIP or CUDA, ``Device Id`` = the
   index): as many GPU agents in the kernels as GPU indexes in the memory events pairs them in order
   (both numberings follow the same enumeration of the GPUs);
2. a trace that lists one device ran on it;
3. the GPUs are a run of consecutive agents starting after the CPU agents (at least one, unless an agent
   0 is a GPU): where the agents seen and the number of devices leave one offset, it is that one;
4. a trace of one rank of a distributed job (``distributedInfo``: rank, world size) whose events use one
   GPU agent ran on the rank's local device, as launchers bind one process per GPU (``cuda:LOCAL_RANK``):
   the rank itself where the job fits on the node (world size <= the devices listed), else the rank modulo
   the devices listed where the job is whole nodes of that many GPUs; taken where the offset it implies is
   one the agents allow;
5. else a host of two sockets (two CPU agents) is assumed, the usual host of multi-GPU Instinct nodes,
   within the offsets the agents allow - the basis says it was assumed.

Where the listed devices are all the same model (every multi-GPU node in the real traces), every choice
names the right GPU; only the index can be off, and only in cases 4 (a process bound otherwise) and 5.
"""

from __future__ import annotations

from collections.abc import Iterable

#: c10 DeviceType codes of a GPU in PyTorch's memory events (ROCm builds report CUDA or HIP)
GPU_DEVICE_TYPES = (1, 6)
USUAL_CPU_AGENTS = 2


def agent_devices(
    agents: Iterable[int],
    device_ids: Iterable[int],
    memory_devices: Iterable[int] = (),
    rank: tuple[int, int] | None = None,
) -> tuple[dict[int, int], str]:
    """Return ({agent id: device index}, the evidence it rests on) for the GPU agents a ROCm trace's
    events carry, the device ids its ``deviceProperties`` list, the GPU device indexes its memory events
    name, and its (rank, world size) from ``distributedInfo`` if it has them. The map is empty when there
    is nothing to map (no agents or no listed devices)."""
    agents = sorted(set(int(a) for a in agents))
    ids = sorted(set(int(i) for i in device_ids))
    memory = sorted(set(int(m) for m in memory_devices if m >= 0))
    if not agents or not ids:
        return {}, ""
    if len(memory) == len(agents) and all(m in ids for m in memory):
        return dict(zip(agents, memory)), "the devices its memory events name"
    if len(ids) == 1:
        return {a: ids[0] for a in agents}, "the trace lists one device"
    n = len(ids)
    low = max(agents[-1] - (n - 1), 0 if agents[0] == 0 else 1)
    high = agents[0]
    if low > high:  # more distinct agents than devices: no offset fits; keep the ids that name a device
        return {a: a for a in agents if a in ids}, "agent ids beyond the listed devices are left unmapped"
    if low == high:
        basis = "GPU agents follow the CPU agents" if low else "the agent ids are the device indexes"
        return {a: ids[a - low] for a in agents}, basis
    local = _local_device(rank, n) if len(agents) == 1 else None
    if local is not None and low <= agents[0] - local <= high:
        r, world = rank
        return {agents[0]: ids[local]}, f"rank {r} of {world}, one process per GPU: its local device {local}"
    offset = min(max(USUAL_CPU_AGENTS, low), high)
    basis = f"assumed {offset} CPU agent{'s' * (offset != 1)} before the GPUs (the trace does not say)"
    return {a: ids[a - offset] for a in agents}, basis


def _local_device(rank: tuple[int, int] | None, n_devices: int) -> int | None:
    """Return the device index a rank's process is bound to on a node of `n_devices` GPUs, one process
    per GPU (local rank = rank modulo the GPUs per node), or None where the job's shape does not say."""
    if rank is None:
        return None
    r, world = rank
    if not 0 <= r < world:
        return None
    if world <= n_devices:
        return r
    return r % n_devices if world % n_devices == 0 else None
