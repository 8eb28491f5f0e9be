"""The live speed-of-light tracker on a small PyTorch model on the CPU: the report, no double counting,
phases, and silence while torch.compile traces."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="the live tracker needs PyTorch (the test command installs the CPU build)")
nn, F = torch.nn, torch.nn.functional

from gpuan.capture.live import Tracker  # noqa: E402
from gpuan.devices.calibrate import measure_cpu  # noqa: E402
from gpuan.devices.model import Ceilings  # noqa: E402
from gpuan.errors import UsageError  # noqa: E402
from gpuan.sol.roofs import Roofs  # noqa: E402


@pytest.fixture(scope="module")
def cpu_roofs() -> Roofs:
    m = measure_cpu(repeats=2)
    return Roofs("cpu", m["flops"], m["memory_bandwidth"], m["link_bandwidth"], "measured")


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4):
        super().__init__()
        self.emb, self.norm = nn.Embedding(vocab, d), nn.LayerNorm(d)
        self.qkv, self.out, self.head = nn.Linear(d, 3 * d), nn.Linear(d, d), nn.Linear(d, vocab, bias=False)
        self.heads = heads

    def forward(self, idx):
        x = self.emb(idx)
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, n, d))
        return torch.matmul(x, self.head.weight.t())  # a function call outside any tracked module


def test_tracker_report_and_counts(cpu_roofs):
    model = TinyLM()
    with Tracker(model, roofs=cpu_roofs) as tracker:
        for _ in range(2):
            with tracker.phase("prefill"):
                model(torch.randint(0, 64, (2, 16)))
            with tracker.phase("decode"):
                model(torch.randint(0, 64, (2, 1)))
    ops = tracker.ops().to_pandas()
    # per forward: embedding, layer norm, 2 Linear modules (the head is used through matmul), SDPA, matmul;
    # nn.Linear calls F.linear inside: counted once, as the module
    per_forward = {"aten::embedding": 1, "aten::layer_norm": 1, "aten::linear": 2,
                   "aten::scaled_dot_product_attention": 1, "aten::matmul": 1}  # fmt: skip
    assert ops.name.value_counts().to_dict() == {k: 4 * v for k, v in per_forward.items()}
    assert set(ops[ops.name == "aten::linear"].layer) == {"Linear"}
    assert ops.groupby("phase").size().to_dict() == {"prefill": 12, "decode": 12}
    sdpa = ops[(ops.name == "aten::scaled_dot_product_attention") & (ops.phase == "prefill")].iloc[0]
    assert json.loads(sdpa.input_dims)[:3] == [[2, 4, 16, 8]] * 3 and json.loads(sdpa.concrete_inputs)[5] == "True"
    scored = tracker.scored().ops.to_pandas()
    assert not scored.model_missing.any() and (scored.efficiency <= 1).all()
    # the causal prefill SDPA: 2·B·H·pairs·(d+d) with pairs = 16·17/2
    sdpa_scored = scored[(scored.name == "aten::scaled_dot_product_attention") & (scored.phase == "prefill")]
    assert sdpa_scored.flops.iloc[0] == 2 * 2 * 4 * (16 * 17 // 2) * 16
    text = tracker.report(top=3)
    for part in ("device cpu (measured roofs)", "by layer type", "Linear", "Embedding", "prefill", "decode"):
        assert part in text
    # the same Result a trace's analyse gives: the layer types are the tracked modules
    result = tracker.result()
    assert result.analysis == "sol" and result.summary["device"] == "cpu" and result.summary["on_cpu"]
    assert {"Linear", "Embedding", "LayerNorm"} <= set(result.to_pandas("by_layer_type").layer)
    assert set(result.to_pandas("by_phase").phase) == {"prefill", "decode"}


def test_tracker_is_silent_while_torch_compile_traces(cpu_roofs):
    def f(a, b):
        return F.linear(torch.matmul(a, b), b) + 1

    recorded_when_traced = []

    def backend(graph, example_inputs):
        recorded_when_traced.append(len(tracker.records))
        return graph.forward

    compiled = torch.compile(f, backend=backend)
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with Tracker(roofs=cpu_roofs) as tracker:
        compiled(a, b)
    # tracing (which runs f on fake tensors) recorded nothing; what the compiled graph then runs eagerly may
    # be recorded, each call at most once
    assert recorded_when_traced == [0]
    names = [r[0] for r in tracker.records]
    assert set(names) <= {"aten::matmul", "aten::linear"} and len(names) == len(set(names))


def test_tracker_restores_what_it_wrapped(cpu_roofs):
    before = (torch.matmul, F.linear, torch.Tensor.__matmul__)
    model = TinyLM()
    with Tracker(model, roofs=cpu_roofs):
        assert torch.matmul is not before[0]
    assert (torch.matmul, F.linear, torch.Tensor.__matmul__) == before
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_periodic_report(cpu_roofs, capsys):
    model = TinyLM()
    with Tracker(model, roofs=cpu_roofs, report_every=2) as tracker:
        for _ in range(4):
            model(torch.randint(0, 64, (1, 4)))
            tracker.step()
    assert capsys.readouterr().out.count("by layer type") == 2


def test_ceilings_come_loaded_or_from_the_default_file(tmp_path, monkeypatch):
    # a CPU has only measured roofs: handed in loaded, or read by the tracker from the default ceilings file
    saved = {"cpu": {"memory_bandwidth": 2e10, "flops": {"vector:fp32": 3e11}, "measured_at": "t"}}
    assert Tracker(cpu=True, ceilings=Ceilings(saved)).roofs.memory_bandwidth == 2e10
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(saved))
    monkeypatch.setenv("GPUAN_CEILINGS", str(path))
    roofs = Tracker(cpu=True).roofs
    assert (roofs.kind, roofs.flops, roofs.memory_bandwidth) == ("measured", {"vector:fp32": 3e11}, 2e10)
    monkeypatch.setenv("GPUAN_CEILINGS", str(tmp_path / "none.json"))
    with pytest.raises(UsageError, match=r"no measured ceilings for 'cpu' in .*none.json; run gpuan sol calibrate"):
        Tracker(cpu=True)
    with pytest.raises(UsageError, match=r"Tracker\(ceilings='measured'\): use \"datasheet\" or"):
        Tracker(cpu=True, ceilings="measured")
