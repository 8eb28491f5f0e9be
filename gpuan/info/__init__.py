"""``gpuan info``: what is in a trace. ``analyse(trace, top=10) -> Result`` counts events per kind, lists
the devices and GPU streams (with their busy time) and the kernels that take the most time."""

from gpuan.info.analysis import analyse, reads

__all__ = ["analyse", "reads"]
