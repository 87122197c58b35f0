"""Model descriptions, determinism, other models and batches, the writer and the CLI command."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import orjson
import pytest
import typer
from typer.testing import CliRunner

from placer.capture.io import capture_to_json, phase_to_json, read_capture
from placer.capture.model import Capture, Phase, Repeat
from placer.capture.writer import render_phase, write_capture_fast
from placer.cli.generate import generate as generate_cmd
from placer.cost.model import program_cost
from placer.errors import InputError
from placer.machine import Machine
from placer.workloads.calibration import phase_ids
from placer.workloads.generate import generate
from placer.workloads.lowering import phase_steps
from placer.workloads.spec import BUNDLED_MODELS, load_model

REPO = Path(__file__).resolve().parents[2]
N_PHASES = len(phase_steps(load_model("siglip-so400m"))[0])  # 69: 8 input, 6 embed, 44 body, 11 post


def test_models_dir_is_the_only_copy() -> None:
    """models/*.toml is the one copy of each bundled description; the package resource is that very file."""
    tomls = sorted(p.relative_to(REPO).as_posix() for p in REPO.rglob("*.toml")
                   if p.stem in BUNDLED_MODELS and not {".venv", "build"} & set(p.relative_to(REPO).parts))
    assert tomls == sorted(f"models/{n}.toml" for n in BUNDLED_MODELS)
    for name in BUNDLED_MODELS:
        res = resources.files("placer.models").joinpath(f"{name}.toml")
        assert res.read_bytes() == (REPO / "models" / f"{name}.toml").read_bytes()


def test_bare_name_ignores_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "siglip-so400m.toml").write_text("hidden = = 1")
    monkeypatch.chdir(tmp_path)
    assert load_model("siglip-so400m").hidden == 1152


def test_model_shapes() -> None:
    s = load_model("siglip-so400m")
    assert (s.hidden, s.mlp, s.heads, s.head_dim, s.layers, s.tokens) == (1152, 4304, 16, 72, 27, 729)
    assert (s.act_bytes, s.weight_bytes, s.attn_bytes) == (1, 1, 2)
    p = load_model(REPO / "models" / "pe-core-l14.toml")
    assert (p.hidden, p.mlp, p.heads, p.head_dim, p.layers, p.tokens) == (1024, 4096, 16, 64, 24, 577)


@pytest.mark.parametrize(("edit", "field", "value"), [
    (("hidden = 1152", "hidden = -3"), "hidden", "-3"),
    (("heads = 16", 'heads = "x"'), "heads", "'x'"),
    (("head_dim = 72", "head_dim = 70"), "head_dim", "70"),
    (("grid = [27, 27]", "grid = [27]"), "patches.grid", "[27]"),
    (("grid = [10, 36, 4]", "grid = [10, 0, 4]"), "lowering.qkv.grid", "[10, 0, 4]"),
    (('order = "n"', 'order = "z"'), "lowering.mlp_down.order", "'z'"),
    (('panel_order = "column"', 'panel_order = "diagonal"'), "lowering.mlp_down.panel_order", "'diagonal'"),
    (('panel_order = "column"', 'panel_order = "column"\nrow_blocks = 2'), "lowering.mlp_down.row_blocks", "2"),
])
def test_bad_model_names_file_field_value(tmp_path: Path, edit: tuple[str, str], field: str, value: str) -> None:
    text = (REPO / "models" / "siglip-so400m.toml").read_text()
    assert edit[0] in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(InputError) as err:
        load_model(bad)
    msg = str(err.value)
    assert str(bad) in msg
    assert field in msg
    assert value in msg


def test_bad_toml_syntax_and_unknown_model(tmp_path: Path) -> None:
    bad = tmp_path / "x.toml"
    bad.write_text("hidden = = 3")
    with pytest.raises(InputError, match="invalid TOML"):
        load_model(bad)
    with pytest.raises(InputError, match="unknown model"):
        load_model("no-such-model")


def test_deterministic_for_a_seed(siglip2: Capture, machine: Machine) -> None:
    again = generate("siglip-so400m", batch=2, machine=machine, seed=0)
    assert again.equals(siglip2)
    other = generate("siglip-so400m", batch=2, machine=machine, seed=1)
    assert not other.allocations.equals(siglip2.allocations)
    # the seed moves holders and memory, not the traffic's shape
    assert [p.n for p in other.phases] == [p.n for p in siglip2.phases]


def test_layers_repeat_and_weight_addresses(machine: Machine) -> None:
    cap = generate("pe-core-l14", batch=1, layers=3, machine=machine)
    assert cap.repeat is not None
    assert cap.repeat.iterations == 3
    assert len(cap.phases) == N_PHASES
    p = cap.phase_by_id(16)
    counts = np.diff(p.src_ptr)
    assert set(counts.tolist()) == {1, 3}
    w = np.flatnonzero(counts == 3)
    addr = p.src_addr[p.src_ptr[w][:, None] + np.arange(3)]
    assert (np.diff(addr, axis=1) > 0).all()  # one address per layer, all different


def test_pe_core_and_batch_one(pe2: Capture, machine: Machine) -> None:
    p = pe2.phase_by_id(16)
    assert int((p.fanout == 36).sum()) == 1154 * 1024 // 32
    one = generate("siglip-so400m", batch=1, machine=machine)
    q = one.phase_by_id(16)
    assert int((q.fanout == 36).sum()) == 729 * 1152 // 32
    assert len(one.phases) == N_PHASES
    cost = program_cost(one, machine)
    assert 0 < cost.worst_table() < program_cost(pe2, machine).worst_table() * 2


def test_batch_four_doubles_fragments(siglip2: Capture, machine: Machine) -> None:
    four = generate("siglip-so400m", batch=4, machine=machine)
    a = siglip2.phase_by_id(16)
    b = four.phase_by_id(16)
    assert int((b.fanout == 36).sum()) == 2 * int((a.fanout == 36).sum())
    # attention blocks shrink as (head, image) pairs double, so the largest phase grows a little less than 2x
    assert max(p.n for p in four.phases) >= 1.6 * max(p.n for p in siglip2.phases)


def test_fast_writer_matches_reference_json(siglip2: Capture, tmp_path: Path) -> None:
    def sample(p: Phase) -> Phase:
        # every kind of transfer of the phase, without turning 300k of them into Python objects twice
        return p.take(np.arange(0, p.n, p.n // 4000 + 1)) if p.n > 4000 else p

    for pid in (0, 9, 16, 23, 55, 63):
        p = sample(siglip2.phase_by_id(pid))
        assert orjson.loads(render_phase(p)) == phase_to_json(p)
    small = siglip2.with_phases([sample(siglip2.phase_by_id(i)) for i in (0, 8, 14, 60, 61, 62, 63)])
    small.repeat = Repeat((14,), 1)
    out = tmp_path / "small.json.gz"
    write_capture_fast(small, out)
    back = read_capture(out)
    assert back.equals(small)
    assert orjson.loads(orjson.dumps(capture_to_json(back))) == orjson.loads(orjson.dumps(capture_to_json(small)))


def test_cli_command(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("generate")(generate_cmd)

    @app.callback()
    def _root() -> None:
        pass

    out = tmp_path / "pe.json.gz"
    res = CliRunner().invoke(app, ["generate", "pe-core-l14", "--batch", "1", "-o", str(out), "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert out.exists()
    assert f"{N_PHASES} phases" in res.output
    assert "transfers" in res.output
    res = CliRunner().invoke(app, ["generate", "pe-core-l14", "--batch", "0", "-o", str(out)])
    assert res.exit_code != 0


def test_a_transfer_names_each_destination_tile_once_when_rows_share_an_owner() -> None:
    """At batch 4 PE-core has more token rows than tiles, so rows of one token can share an owner tile; the
    position row multicast to a token's owners named such a tile twice, which the capture reader rejects (``placer
    generate pe-core-l14 --batch 4`` wrote a capture ``placer solve`` could not load). The tile now receives it
    once."""
    cap = generate("pe-core-l14", 4)
    for phase in cap.phases:
        key = phase.dst_transfer().astype(np.int64) * 4096 + phase.dst_tile
        # no key twice: sorted (a stable sort: the keys come almost in order), no two neighbours equal -- np.unique
        # gives the same answer but took 16 s on these 20 million destinations
        key.sort(kind="stable")
        assert not (key[1:] == key[:-1]).any(), phase.phase
    pos = next(p for p in cap.phases if p.phase == phase_ids("pe-core-l14")["embed.pos"])
    # each token's row goes to the owners of that token's four rows (two or three tiles), each once; the class
    # token's too: 578 multicasts
    assert pos.n == 577 + 1
    assert pos.fanout.min() >= 2
    assert pos.fanout.max() <= 4
