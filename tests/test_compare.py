"""``gpuan compare``: alignment, matching, cycle pairing, the XLSX/CSV outputs and the command line."""

from __future__ import annotations

import csv
import math

import numpy as np
import openpyxl
import pandas as pd
import pytest

import gpuan
from gpuan import compare
from gpuan.cli import main
from gpuan.compare import lcs
from gpuan.compare.pairing import COLUMNS, align, match
from gpuan.compare.similarity import pair_cycles, similarity
from gpuan.cycles.signature import signature
from gpuan.errors import UsageError
from gpuan.outputs import compare as output
from gpuan.trace.cycle_csv import read_cycle_csv
from gpuan.trace.inputs import CycleTable

# kernels of one model in two builds: same signature, other template arguments / tile sizes / variants
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"  # noqa: E501
GEMM_OLD = "_gemm_a16w16_kernel_BLOCK_SIZE_M_128_BLOCK_SIZE_N_64_GROUP_SIZE_M_8"
GEMM_NEW = "_gemm_a16w16_kernel_BLOCK_SIZE_M_256_BLOCK_SIZE_N_128_GROUP_SIZE_M_4"
FMHA = "fmha_fwd_hdim128_kernel_128x64"
INDEX = "void at::native::index_select_kernel<float, long>(float*, float const*, long const*, long, long)"
NORM = "void rms_norm_kernel<c10::BFloat16, 256>(c10::BFloat16*, c10::BFloat16 const*, float, int)"
FUSED = "triton_poi_fused_add_mul_silu_0"
REDUCE_OLD = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)"  # noqa: E501
REDUCE_NEW = "void at::native::reduce_kernel<256, 2, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)"  # noqa: E501
ATTN_OLD = "paged_attention_ll4mi_QKV_mfma16_kernel_1tg_ps"
ATTN_NEW = "paged_attention_ll4mi_QKV_mfma16_kernel_vs"

# the baseline in its natural order; the file holds it rotated by 2 (starts at FMHA)
BASE_CYCLE = [(ADD, 100.0), (GEMM_OLD, 500.0), (FMHA, 50.0), (INDEX, 20.0), (NORM, 10.0), (REDUCE_OLD, 30.0)]
BASE_FILE = BASE_CYCLE[2:] + BASE_CYCLE[:2]
NEW_FILE = [(ADD, 80.0), (GEMM_NEW, 600.0), (FMHA, 51.0), (NORM, 10.0), (FUSED, 5.0), (REDUCE_NEW, 25.0)]
# the alignment these must give: (baseline kernel, new kernel, match type)
ALIGNED = [
    (ADD, ADD, "exact"),
    (GEMM_OLD, GEMM_NEW, "similar"),
    (FMHA, FMHA, "exact"),
    (INDEX, "", "removed"),
    (NORM, NORM, "exact"),
    ("", FUSED, "new_only"),
    (REDUCE_OLD, REDUCE_NEW, "similar"),
]
FILLS = {"exact": "E2EFDA", "similar": "DDEBF7", "removed": "FFC7CE", "new_only": "FFEB9C"}


def write_cycle_csv(path, kernels, iterations=None, avg_cycle_us=None):
    """Write an uplifter-layout cycle CSV; the ``#`` metadata rows only when `iterations` is given."""
    total = sum(avg for _, avg in kernels)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        if iterations is not None:
            cycle = avg_cycle_us if avg_cycle_us is not None else total
            w.writerow(["# Cycle Statistics"])
            w.writerow(["# Iterations", iterations])
            w.writerow(["# Kernels per cycle", len(kernels)])
            w.writerow(["# Avg cycle time (us)", f"{cycle:.3f}"])
            w.writerow(["# Total time (us)", f"{cycle * iterations:.3f}"])
            w.writerow([])
        w.writerow(["index", "kernel_name", "avg_duration_us", "min_duration_us", "max_duration_us", "stddev_us",
                    "count", "pct_of_cycle"])  # fmt: skip
        for k, (name, avg) in enumerate(kernels):
            w.writerow([k, name, f"{avg:.3f}", f"{avg * 0.9:.3f}", f"{avg * 1.1:.3f}", f"{avg * 0.05:.3f}",
                        iterations or 1, f"{avg / total * 100:.4f}"])  # fmt: skip
    return path


def table(kernels, path="t.csv"):
    rows = pd.DataFrame({
        "kernel_name": [k for k, _ in kernels], "avg_duration_us": [a for _, a in kernels],
        "min_duration_us": [a for _, a in kernels], "max_duration_us": [a for _, a in kernels],
        "stddev_us": [0.0] * len(kernels),
    })  # fmt: skip
    return CycleTable(path, rows)


@pytest.fixture
def pair(tmp_path):
    base = write_cycle_csv(tmp_path / "base.csv", BASE_FILE, iterations=10, avg_cycle_us=700.0)
    new = write_cycle_csv(tmp_path / "new.csv", NEW_FILE)  # an old uplifter file: no metadata rows
    return base, new


def test_signatures_of_the_fixture_kernels():
    for old, new in ((GEMM_OLD, GEMM_NEW), (REDUCE_OLD, REDUCE_NEW), (ATTN_OLD, ATTN_NEW)):
        assert old != new and signature(old) == signature(new)
    sigs = {signature(k) for k, _ in BASE_CYCLE + NEW_FILE}
    assert len(sigs) == 7


def test_align_finds_the_rotation_and_the_pairs(pair):
    base, new = map(read_cycle_csv, pair)
    frame = align(base, new)
    assert list(frame.columns) == list(COLUMNS)
    assert frame.attrs["rotation"] == 4 and frame.attrs["common"] == 5
    assert list(zip(frame.base_kernel, frame.new_kernel, frame.match_type)) == ALIGNED
    both = frame[frame.match_type.isin(["exact", "similar"])]
    assert both.change_pct.round(6).tolist() == [-20.0, 20.0, 2.0, 0.0, round(-500 / 30, 6)]
    one_side = frame[~frame.match_type.isin(["exact", "similar"])]
    assert one_side.change_pct.isna().all()
    removed = frame[frame.match_type == "removed"].iloc[0]
    assert removed.base_avg == 20.0 and math.isnan(removed.new_avg) and removed.new_kernel == ""
    assert removed.base_min == pytest.approx(18.0) and removed.base_max == pytest.approx(22.0)


def test_align_of_a_cycle_with_itself_is_exact(pair):
    base = read_cycle_csv(pair[0])
    frame = align(base, base)
    assert frame.attrs["rotation"] == 0
    assert (frame.match_type == "exact").all() and (frame.change_pct == 0).all()
    assert frame.base_kernel.tolist() == [k for k, _ in BASE_FILE]


def test_rotation_lengths_agree_with_the_dp_table():
    rng = np.random.default_rng(7)
    for _ in range(60):
        n, m, vocab = int(rng.integers(1, 160)), int(rng.integers(1, 200)), int(rng.integers(1, 9))
        a, b = rng.integers(0, vocab, n), rng.integers(0, vocab, m)
        lengths = [lcs.lcs_table(np.roll(a, -r), b)[-1, -1] for r in range(n)]
        assert lcs.best_rotation(a, b, vocab) == (int(np.argmax(lengths)), max(lengths))


def test_match_mode(pair):
    base, new = map(read_cycle_csv, pair)
    frame = match(base, new)
    rows = list(zip(frame.base_kernel, frame.new_kernel, frame.match_type))
    # new kernels in their order, then the baseline kernels left in baseline order
    assert rows == [
        (ADD, ADD, "exact"),
        (GEMM_OLD, GEMM_NEW, "similar"),
        (FMHA, FMHA, "exact"),
        (NORM, NORM, "exact"),
        ("", FUSED, "new_only"),
        (REDUCE_OLD, REDUCE_NEW, "similar"),
        (INDEX, "", "removed"),
    ]


def test_match_takes_the_lowest_free_index():
    base = table([(NORM, 1.0), (NORM, 2.0), (ATTN_OLD, 3.0)])
    new = table([(ATTN_NEW, 4.0), (NORM, 5.0), (NORM, 6.0), (NORM, 7.0)])
    frame = match(base, new)
    assert frame.match_type.tolist() == ["similar", "exact", "exact", "new_only"]
    assert frame.base_avg.tolist()[:3] == [3.0, 1.0, 2.0]


def test_pair_cycles_greedy_by_similarity():
    t0 = table([(ADD, 50.0), (FMHA, 50.0)])
    t1 = table([(GEMM_OLD, 100.0)])
    t2 = table([(ADD, 60.0), (FMHA, 40.0)])
    n0 = table([(GEMM_NEW, 300.0)])  # same signature, other time: shares are what count
    n1 = table([(ADD, 6.0), (FMHA, 4.0)])
    assert similarity(t0, n1) == pytest.approx(0.9 / 1.1)
    assert similarity(t1, n0) == 1.0
    # t2 takes n1 (100%) before t0 (82%) can
    assert pair_cycles([t0, t1, t2], [n0, n1]) == [(1, 0, 1.0), (2, 1, 1.0)]
    assert pair_cycles([t0], [n1]) == [(0, 0, pytest.approx(0.9 / 1.1))]


def test_pair_cycles_threshold():
    new = [table([(ADD, 100.0)])]
    assert pair_cycles([table([(ADD, 30.0), (INDEX, 70.0)])], new) == []  # 0.3 / 1.7 < 0.2
    assert pair_cycles([table([(ADD, 40.0), (INDEX, 60.0)])], new) == [(0, 0, pytest.approx(0.25))]
    assert pair_cycles([table([(INDEX, 1.0)])], new) == []


def fill(cell) -> str:
    return cell.fill.fgColor.rgb[-6:]


def test_xlsx_layout(pair, tmp_path):
    base, new = map(read_cycle_csv, pair)
    out = tmp_path / "cmp.xlsx"
    output.write_xlsx(compare.analyse((base, new)), out)
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == ["Comparison"]
    ws = wb["Comparison"]
    assert [c.value for c in ws[1]] == list(output.HEADERS)
    assert fill(ws["A1"]) == "4472C4" and ws["A1"].font.b and ws["A1"].font.color.rgb[-6:] == "FFFFFF"
    assert ws["A1"].alignment.horizontal == "center"
    assert ws["A2"].value == "Baseline: 6 kernels × 10 iters, 700.0 µs/cycle"
    assert ws["F2"].value == "New: 6 kernels, 771.0 µs/cycle"
    assert ws["G2"].value == pytest.approx(771.0)
    assert ws["K2"].value == pytest.approx(10.14) and fill(ws["K2"]) == "FF0000"
    last = 2 + len(ALIGNED)
    assert [ws.cell(r, 12).value for r in range(3, last + 1)] == [t for _, _, t in ALIGNED]
    assert [ws.cell(r, 1).value for r in range(3, last + 1)] == [b or None for b, _, _ in ALIGNED]
    # ADD 100 -> 80 is faster, GEMM 500 -> 600 slower, FMHA 50 -> 51 within 5%
    assert ws["K3"].value == pytest.approx(-20.0) and fill(ws["K3"]) == "00B050" and ws["K3"].font.b
    assert ws["K4"].value == pytest.approx(20.0) and fill(ws["K4"]) == "FF0000"
    assert ws["K5"].value == pytest.approx(2.0) and fill(ws["K5"]) == "FFC000"
    assert ws["K6"].value == "REMOVED" and fill(ws["K6"]) == "00B050"
    assert ws["K8"].value == "NEW" and fill(ws["K8"]) == "FFC000"
    for r, (_, _, kind) in enumerate(ALIGNED, start=3):
        assert fill(ws.cell(r, 1)) == fill(ws.cell(r, 10)) == fill(ws.cell(r, 12)) == FILLS[kind]
    assert ws["G6"].value is None and ws["B8"].value is None  # the missing side has no numbers
    assert ws["B3"].value == 100.0 and ws["C3"].value == pytest.approx(90.0) and ws["J4"].value == pytest.approx(30.0)
    assert ws.freeze_panes == "A2"
    assert ws.auto_filter.ref == f"A1:L{last}"
    assert ws.column_dimensions["A"].width == pytest.approx(55, abs=1)
    assert ws.column_dimensions["L"].width == pytest.approx(15, abs=1)


def test_csv_output(pair, tmp_path):
    base, new = map(read_cycle_csv, pair)
    out = tmp_path / "cmp.csv"
    output.write_csv(compare.analyse((base, new)), out)
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == list(output.HEADERS)
    assert rows[1] == [ADD, "100.000", "90.000", "110.000", "5.000", ADD, "80.000", "72.000", "88.000", "4.000",
                       "-20.00", "exact"]  # fmt: skip
    assert rows[4][5:] == ["", "", "", "", "", "REMOVED", "removed"]
    assert rows[6][:5] == ["", "", "", "", ""] and rows[6][10:] == ["NEW", "new_only"]
    assert [r[11] for r in rows[1:]] == [t for _, _, t in ALIGNED]


def assert_one_line_error(capsys, code, path, words):
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and words in lines[0], err


def test_cli_xlsx_and_csv(pair, tmp_path, capsys):
    base, new = pair
    out = tmp_path / "out.xlsx"
    assert main(["compare", str(base), str(new), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "exact 3, similar 2, removed 1, new_only 1" in text
    assert "700.0 us -> 771.0 us (+10.1%)" in text and "rotation 4" in text
    assert text.count(" us ") >= 5 and "+100.000 us" in text  # GEMM 500 -> 600 is the largest change
    assert openpyxl.load_workbook(out).sheetnames == ["Comparison"]
    out_csv = tmp_path / "out.csv"
    assert main(["compare", str(base), str(new), "-o", str(out_csv), "--mode", "match"]) == 0
    rows = list(csv.reader(out_csv.open(newline="", encoding="utf-8")))
    assert rows[-1][11] == "removed" and len(rows) == 8


def test_cli_bad_input(pair, tmp_path, capsys):
    base, new = pair
    out = tmp_path / "out.xlsx"
    missing = tmp_path / "missing.csv"
    assert_one_line_error(capsys, main(["compare", str(missing), str(new), "-o", str(out)]), missing, "cannot read")
    garbage = tmp_path / "garbage.csv"
    garbage.write_bytes(b"hello,world\n1,2\n")
    assert_one_line_error(
        capsys, main(["compare", str(base), str(garbage), "-o", str(out)]), garbage, "not a cycle CSV"
    )
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)))
    assert_one_line_error(capsys, main(["compare", str(binary), str(new), "-o", str(out)]), binary, "cannot read")
    lines = new.read_text().splitlines()
    damaged = {}
    for label, change in (("cut", lambda row: row[: len(row) // 3]), ("nan", lambda row: row.replace(",", ",nan,", 1))):
        d = tmp_path / f"{label}.csv"
        d.write_text("\n".join([*lines[:-1], change(lines[-1])]) + "\n")
        damaged[label] = d
    assert_one_line_error(
        capsys, main(["compare", str(base), str(damaged["cut"]), "-o", str(out)]), damaged["cut"], f"line {len(lines)}:"
    )
    assert_one_line_error(
        capsys, main(["compare", str(base), str(damaged["nan"]), "-o", str(out)]), damaged["nan"], "is not a number"
    )
    txt = tmp_path / "out.txt"
    assert_one_line_error(capsys, main(["compare", str(base), str(new), "-o", str(txt)]), txt, ".xlsx or .csv")
    nowhere = tmp_path / "no" / "dir" / "out.xlsx"
    assert_one_line_error(capsys, main(["compare", str(base), str(new), "-o", str(nowhere)]), nowhere, "cannot write")
    assert not out.exists() and not txt.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "base.csv", "binary.csv", "cut.csv", "garbage.csv", "nan.csv", "new.csv"
    ]  # fmt: skip


def test_cli_all(tmp_path, capsys):
    attn = [(ATTN_OLD, 40.0), (NORM, 5.0), (GEMM_OLD, 55.0)]
    step = [(ADD, 10.0), (INDEX, 20.0), (REDUCE_OLD, 70.0)]
    write_cycle_csv(tmp_path / "a_cycle_1.csv", step, iterations=5)
    write_cycle_csv(tmp_path / "a_cycle_2.csv", attn, iterations=40)
    write_cycle_csv(tmp_path / "a_cycle_4.csv", step)  # after a gap: not part of the run
    # the new run found the cycles in the other order, and one more that matches nothing
    write_cycle_csv(tmp_path / "b_cycle_1.csv", [(ATTN_NEW, 32.0), (NORM, 4.0), (GEMM_NEW, 44.0)], iterations=40)
    write_cycle_csv(tmp_path / "b_cycle_2.csv", [(ADD, 10.0), (REDUCE_NEW, 60.0)], iterations=5)
    write_cycle_csv(tmp_path / "b_cycle_3.csv", [(FUSED, 1.0)])
    out = tmp_path / "all.xlsx"
    assert main(["compare", "--all", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "unpaired new cycles" in text and "b_cycle_3.csv" in text
    wb = openpyxl.load_workbook(out)
    # 'step' vs its new version: shares 0.1/0.2/0.7 vs 1/7, 6/7 -> (0.1 + 0.7) / (1/7 + 0.2 + 6/7)
    assert wb.sheetnames == ["Base1-New2 (67%)", "Base2-New1 (100%)"]
    assert [c.value for c in wb["Base2-New1 (100%)"]["L"][2:]] == ["similar", "exact", "similar"]
    assert [c.value for c in wb["Base1-New2 (67%)"]["L"][2:]] == ["exact", "removed", "similar"]
    csv_out = tmp_path / "all.csv"
    code = main(["compare", "--all", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(csv_out)])
    assert_one_line_error(capsys, code, csv_out, ".xlsx")
    assert not csv_out.exists()


def test_cli_all_llm_files_and_missing_base(tmp_path, capsys):
    prefill = [(GEMM_OLD, 80.0), (FMHA, 20.0)]
    decode = [(ATTN_OLD, 60.0), (NORM, 40.0)]
    for base in ("a", "b"):
        write_cycle_csv(tmp_path / f"{base}_prefill.csv", prefill, iterations=32)
        write_cycle_csv(tmp_path / f"{base}_decode.csv", decode, iterations=512)
    out = tmp_path / "llm.xlsx"
    assert main(["compare", "--all", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out)]) == 0
    assert openpyxl.load_workbook(out).sheetnames == ["Base1-New1 (100%)", "Base2-New2 (100%)"]
    capsys.readouterr()
    missing = tmp_path / "zz"
    code = main(["compare", "--all", str(missing), str(tmp_path / "b"), "-o", str(tmp_path / "x.xlsx")])
    assert_one_line_error(capsys, code, missing, "no cycle CSVs")
    assert not (tmp_path / "x.xlsx").exists()


def test_sheet_names_are_valid():
    assert output.sheet_name("Base1-New2 [a/b]: x?*") == "Base1-New2 _a_b__ x__"
    assert len(output.sheet_name("Base123456789-New123456789 (100%)")) == 31


def test_end_to_end_two_runs_of_one_trace(data_dir, tmp_path, capsys):
    trace = data_dir / "kineto" / "v100_rank0_ns_resolution.json.gz"
    if not trace.is_file():
        pytest.skip(f"{trace} not found")
    for base in ("a", "b"):
        assert main(["cycles", str(trace), "-o", str(tmp_path / base)]) == 0
    out = tmp_path / "same.xlsx"
    assert main(["compare", "--all", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out)]) == 0
    capsys.readouterr()
    files = sorted(tmp_path.glob("a_cycle_*.csv"))
    assert files
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == [f"Base{k}-New{k} (100%)" for k in range(1, len(files) + 1)]
    for ws in wb.worksheets:
        rows = list(ws.iter_rows(min_row=3, values_only=True))
        assert rows and all(r[11] == "exact" for r in rows), ws.title
        assert all(abs(r[10]) == 0 for r in rows), ws.title


def test_analyse_tables_and_summary(pair):
    base, new = map(read_cycle_csv, pair)
    result = compare.analyse((base, new))
    assert result.analysis == "compare" and list(result.tables) == ["kernels", "cycles"]
    kernels = result.to_pandas("kernels")
    assert kernels.columns.tolist() == ["pair", *COLUMNS, "delta_us"] and (kernels.pair == 0).all()
    assert list(zip(kernels.base_kernel, kernels.new_kernel, kernels.match_type)) == ALIGNED
    frame = align(base, new)
    pd.testing.assert_frame_equal(kernels[list(COLUMNS)], frame, check_dtype=False)
    # the change of each kernel's average, a missing side counting 0 µs
    expected = frame["new_avg"].fillna(0.0) - frame["base_avg"].fillna(0.0)
    np.testing.assert_allclose(kernels["delta_us"], expected)
    (row,) = result["cycles"].to_pylist()
    assert row["base_cycle_us"] == 700.0 and row["new_cycle_us"] == pytest.approx(771.0)
    assert (row["base_iterations"], row["new_iterations"], row["base_kernels"], row["new_kernels"]) == (10, 0, 6, 6)
    assert result.summary == {
        "mode": "align", "pairs": 1, "exact": 3, "similar": 2, "removed": 1, "new_only": 1,
        "base_cycle_us": 700.0, "new_cycle_us": pytest.approx(771.0), "cycle_change_pct": pytest.approx(10.142857),
        "rotation": 4, "common": 5,
    }  # fmt: skip
    matched = compare.analyse((base, new), mode="match")
    assert "rotation" not in matched.summary and matched["cycles"]["rotation"].null_count == 1


def test_analyse_rejects_an_unknown_mode(pair):
    base, new = map(read_cycle_csv, pair)
    with pytest.raises(UsageError, match="mode"):
        compare.analyse((base, new), mode="zip")


def test_analyse_cycle_csvs_of_a_real_trace(data_dir, tmp_path):
    """The prefill and decode phases of a real LLM trace, as gpuan cycles writes them, read back and compared."""
    path = data_dir / "kineto" / "cpu_tiny_lm_prefill_decode.json.gz"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    from gpuan.outputs import cycles as cycles_output

    found = gpuan.cycles.analyse(gpuan.load(path), kind="cpu_op", mode="llm")
    paths = cycles_output.write_csvs(found, str(tmp_path / "lm"))
    assert paths == [str(tmp_path / f"lm_{phase}.csv") for phase in ("prefill", "decode")]
    prefill, decode = map(read_cycle_csv, paths)
    result = compare.analyse((prefill, decode))
    kernels = result.to_pandas("kernels")
    assert len(kernels) == sum(result.summary[kind] for kind in compare.MATCH_TYPES)
    assert (kernels.match_type != "new_only").sum() == len(prefill.rows)
    assert (kernels.match_type != "removed").sum() == len(decode.rows)
    assert result.summary["base_cycle_us"] == prefill.avg_cycle_us > 0
    # a run against itself: every cycle pairs with its own file, every kernel exactly
    runs = compare.analyse_runs(([prefill, decode], [prefill, decode]))
    assert runs.summary == {"mode": "align", "pairs": 2, "unpaired_base": [], "unpaired_new": []}
    cycles = runs.to_pandas("cycles")
    assert cycles[["base", "new"]].values.tolist() == [[0, 0], [1, 1]] and (cycles.similarity == 1.0).all()
    assert (runs.to_pandas("kernels").match_type == "exact").all()
