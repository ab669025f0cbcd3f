"""Recipes ranked by a capture (the issue's acceptance test), the plan with --profile, recipe
signatures as checked data, and the plain plan path not importing the profile stage."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import make_fixture
from optkit.catalog.lint import lint
from optkit.catalog.loader import load_catalog
from optkit.cli.main import cli
from optkit.errors import ValidationFailed

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "one-rank"
FLAGSHIP = ["--model", "qwen3.5-35b", "--target", "910c", "--mtp"]
# valid for the flagship request with MTP (at plan's default concurrencies 1,4,8: the L2Norm fusion
# regresses at c8), and what the injected capture shows them removing
VALID_INJECTED = ["sampler-min-tokens-spec-mask-cache", "gdn-conv-weight-transpose-cache"]


def run(*args) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_injected_signatures_recipes_rank_first_with_their_injected_savings():
    data = json.loads(run("profile", FIXTURE, *FLAGSHIP, "--json"))
    ranking = data["ranking"]
    assert [r["recipe"] for r in ranking if r["valid"]] == VALID_INJECTED  # by saving, largest first
    assert ranking[:len(VALID_INJECTED)] == [r for r in ranking if r["valid"]]
    # the plan's selection first, then the rest (the greedy bf16 fast path is no-effect while clients set
    # min_tokens, the request's default)
    assert [r["status"] for r in ranking] == ["selected"] * 2 + ["regresses", "excluded", "no-effect", "no-effect"]
    assert {r["recipe"] for r in ranking} <= set(make_fixture.INJECTED)  # nothing the capture does not show
    for r in ranking:
        if r["signatures"]:
            assert r["saving_us_per_step"] == pytest.approx(make_fixture.INJECTED[r["recipe"]], rel=0.10)
            assert r["basis"].startswith("from your profile of 2025-12-02 00:00: ")
    by_id = {r["recipe"]: r for r in ranking}
    # present, but the resolver says why not here: the slot-mapping fast path is excluded under async MTP
    assert by_id["blocktable-slot-mapping-cpu-fastpath"]["status"] == "excluded"
    assert "async speculative decoding" in by_id["blocktable-slot-mapping-cpu-fastpath"]["reason"]
    # present, but the signature says this recipe does not remove it with MTP (its 'when')
    assert by_id["sampler-greedy-bf16-fastpath"]["signatures"] == []
    assert by_id["sampler-greedy-bf16-fastpath"]["not_removed"][0]["when"] == "not spec.mtp"
    gap = data["profile"]["ranks"][0]["gaps"][0]
    assert (gap["op"], gap["occurrence"]) == make_fixture.UNEXPLAINED_GAP[:2]
    assert gap["gap_us"] == pytest.approx(make_fixture.UNEXPLAINED_GAP[2], rel=0.10)


def test_the_table_names_the_recipes_and_the_unexplained_gap():
    text = run("profile", FIXTURE, *FLAGSHIP)
    assert "Recipes by your profile" in text
    first = next(line for line in text.splitlines() if line.startswith("│ 1 "))
    assert "sampler-min-tokens-spec-mask-cache" in first and "1,601.0 µs" in first
    gaps = text[text.index("Host gaps no recipe explains"):]
    assert "AddRmsNorm" in gaps and "21 of 40" in gaps and "250.0 µs" in gaps


def test_the_plans_other_concurrencies_extrapolate_the_profiles_number_not_the_articles():
    data = json.loads(run("plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--json", "--profile", FIXTURE))
    decision = data["decisions"]["sampler-min-tokens-spec-mask-cache"]
    assert decision["expected_tpot_saving_ms"] == {"c1": 1.601, "c4": 1.601, "c8": 1.601}  # the article: 1.9
    assert decision["basis"]["c4"].startswith("extrapolated from c1, from your profile of 2025-12-02 00:00")


@pytest.mark.parametrize("flag", ["--profile-at", "--at"], ids=["profile-at", "old-name-at"])
def test_profile_and_plan_share_the_name_of_the_captures_load(flag):
    data = json.loads(run("profile", FIXTURE, *FLAGSHIP, "--concurrency", "1,4", flag, "4", "--json"))
    assert data["concurrency"] == 4
    assert data["ranking"][0]["basis"].startswith("from your profile")
    from optkit.cli.profile_cmds import profile_command

    shown = [o for p in profile_command.params if not getattr(p, "hidden", False) for o in p.opts]
    assert "--profile-at" in shown and "--at" not in shown


def test_without_mtp_the_single_token_recipes_count_too():
    data = json.loads(run("profile", FIXTURE, "--model", "qwen3.5-35b", "--target", "910c", "--json"))
    by_id = {r["recipe"]: r for r in data["ranking"]}
    assert by_id["sampler-greedy-bf16-fastpath"]["saving_us_per_step"] == pytest.approx(10.0)
    assert by_id["gdn-rearrange-qkv-view"]["saving_us_per_step"] == pytest.approx(123.0)


def test_without_a_model_it_decomposes_and_lists_the_signatures():
    text = run("profile", FIXTURE)
    assert "Recipe signatures present (give --model and --target" in text
    assert "sampler-min-tokens-spec-mask-cache" in text


def test_the_chart_is_a_png_and_the_same_every_time(tmp_path):
    run("profile", FIXTURE, *FLAGSHIP, "--chart", tmp_path / "a.png")
    run("profile", FIXTURE, *FLAGSHIP, "--chart", tmp_path / "b.png")
    one, two = (tmp_path / "a.png").read_bytes(), (tmp_path / "b.png").read_bytes()
    assert one[:8] == b"\x89PNG\r\n\x1a\n" and one == two


def test_plan_with_the_profile_uses_its_numbers_over_the_articles():
    plain = json.loads(run("plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--concurrency", "1", "--json"))
    profiled = json.loads(run("plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--concurrency", "1", "--json",
                              "--profile", FIXTURE))

    def basis(plan, rid):
        return plan["decisions"][rid]["basis"]["c1"]

    rid = "sampler-min-tokens-spec-mask-cache"
    assert not basis(plain, rid).startswith("from your profile")
    assert basis(profiled, rid).startswith("from your profile of 2025-12-02 00:00: 1601 µs per decode step")
    assert profiled["decisions"][rid]["expected_tpot_saving_ms"]["c1"] == pytest.approx(1.601)


def test_plan_profile_counts_only_at_the_concurrency_it_was_captured_at():
    data = json.loads(run("plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--concurrency", "1,4", "--json",
                          "--profile", FIXTURE, "--profile-at", "4"))
    basis = data["decisions"]["sampler-min-tokens-spec-mask-cache"]["basis"]
    assert basis["c4"].startswith("from your profile")
    assert not basis["c1"].startswith("from your profile")


def test_the_plain_plan_path_imports_neither_the_profile_stage_nor_matplotlib():
    code = ("import sys; from optkit.cli.main import main; sys.argv = ['optkit', 'plan', 'qwen3.5-35b', '--target', "
            "'910c', '--mtp', '--json']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('optkit.profile', 'matplotlib'))), file=sys.stderr)")
    run_ = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run_.stderr.strip().splitlines()[-1] == "[]", run_.stderr


VALID = textwrap.dedent("""\
    id: demo
    title: Demo recipe
    summary: A recipe used by the signature tests.
    kind: env
    provenance:
      article: {part: 2, section: test, quote: "some quote"}
      seed_map: B.0
      upstream: {status: new, evidence: nowhere yet}
    versions:
      vllm_ascend: ">=0.23.0,<0.24"
    env:
      - {name: DEMO_VAR, value: "1"}
    accuracy: {check: greedy-identical, why: it changes nothing the model computes}
    verification: {level: declared, needs_npu: true}
    signatures:
    """)


def _catalog(tmp_path: Path, signature: str) -> Path:
    folder = tmp_path / "recipes" / "demo"
    folder.mkdir(parents=True)
    (folder / "recipe.yaml").write_text(VALID + textwrap.indent(signature, "  "), encoding="utf-8")
    (tmp_path / "versions").mkdir()
    for release in ("0.22.1rc1", "0.23.0", "0.30.0rc2"):
        (tmp_path / "versions" / f"{release}.yaml").write_text("{}\n")
    return tmp_path


F = "recipes/demo/recipe.yaml"
SCHEMA_CASES = [
    ("no-name-or-type", "- {count: 1, msg: what it is}", "a signature needs 'name' (or, for a kernel, 'type')"),
    ("matches-everything", "- {name: '.*', msg: what it is}", "matches an empty name, so it would match every op"),
    ("layer-without-layers", "- {name: x, per: layer, msg: what it is}", "per: layer needs 'layers'"),
    ("layers-without-layer", "- {name: x, layers: gdn, msg: what it is}", "per: layer needs 'layers'"),
    ("host-call-with-type", "- {what: host-call, name: x, type: Cast, msg: what it is}",
     "'type' and 'input_dim' describe kernels"),
    ("bad-regex", "- {name: 'a(', msg: what it is}", "is not a regular expression"),
    ("bad-layers", "- {name: x, per: layer, layers: moe, msg: what it is}", "signatures.0.layers"),
    ("bad-when", "- {name: x, when: 'spec.mtpp', msg: what it is}", "unknown fact 'spec.mtpp'"),
    ("bad-versions", "- {name: x, versions: '0.23', msg: what it is}", "is not a PEP 440 version specifier"),
    ("zero-count", "- {name: x, count: 0, msg: what it is}", "greater than or equal to 1"),
]


@pytest.mark.parametrize("signature, message", [c[1:] for c in SCHEMA_CASES], ids=[c[0] for c in SCHEMA_CASES])
def test_bad_signatures_are_refused_at_load(tmp_path, signature, message):
    with pytest.raises(ValidationFailed) as info:
        load_catalog(_catalog(tmp_path, signature))
    text = str(info.value).replace("[", ".").replace("]", "")
    assert F in text and "signatures" in text and message.replace("[", ".").replace("]", "") in text, text


LINT_CASES = [
    ("outside-the-recipe", "- {name: x, versions: '>=0.30', msg: what it is}",
     "signatures[0].versions: '>=0.30' holds none of the releases the recipe applies to (>=0.23.0,<0.24)"),
    ("named-twice", "- {name: x, msg: what it is}\n- {name: x, versions: '==0.23.0', msg: again}",
     "signatures[1].versions: names the same ops as signatures[0] on 0.23.0"),
]


@pytest.mark.parametrize("signature, message", [c[1:] for c in LINT_CASES], ids=[c[0] for c in LINT_CASES])
def test_lint_finds_signatures_that_cannot_match(tmp_path, signature, message):
    problems = [str(p) for p in lint(_catalog(tmp_path, signature))]
    assert any(message in p and p.startswith(F) for p in problems), problems


def test_a_good_signature_lints_clean(tmp_path):
    problems = [str(p) for p in lint(_catalog(tmp_path, "- {name: x, count: 2, per: layer, layers: gdn, msg: what it is}"))]
    assert not any("signatures" in p for p in problems), problems


def test_the_fixture_injects_every_shipped_signature():
    shipped = {r.id for r in load_catalog() if r.signatures}
    assert shipped == set(make_fixture.INJECTED)


RELEASES = [  # what the capture records → the plan's release → the check's words
    pytest.param("0.23.0", "0.23.0", "captured on vllm-ascend 0.23.0, the plan's release", id="recorded-same"),
    pytest.param("0.23.0", "0.30.0rc2", "MISMATCH: captured on vllm-ascend 0.23.0, but the plan is for 0.30.0rc2",
                 id="recorded-other"),
    pytest.param(None, "0.30.0rc2", "the capture does not record its vllm-ascend release (unknown); its torch_npu "
                 "2.10.0.post4 is the pin of", id="unrecorded-pin-fits"),
    pytest.param(None, "0.20.2rc1", "MISMATCH: the capture does not record its vllm-ascend release (unknown); its "
                 "torch_npu 2.10.0.post4 is the pin of", id="unrecorded-pin-differs"),
]


@pytest.mark.parametrize("recorded, release, words", RELEASES)
def test_the_captures_release_is_checked_against_the_plans(tmp_path, recorded, release, words):
    make_fixture.write(tmp_path, release=recorded)
    text = run("plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--profile", tmp_path,
               "--vllm-ascend-version", release)
    line = next(x for x in text.splitlines() if x.startswith("profile: "))
    assert words in line
    profiled = json.loads(run("profile", tmp_path, *FLAGSHIP, "--vllm-ascend-version", release, "--json"))
    assert words in profiled["profile"]["release_check"]
    alone = json.loads(run("profile", tmp_path, "--vllm-ascend-version", release, "--json"))  # without a model
    assert words in alone["profile"]["release_check"]


@pytest.mark.parametrize("x, align", [(50.0, "left"), (500.0, "center"), (950.0, "right")],
                         ids=["left-edge", "middle", "right-edge"])
def test_a_gap_label_near_an_edge_grows_inwards(x, align):
    from optkit.profile.timeline import label_align

    assert label_align(x, 1000.0) == align


def test_a_blocking_copys_saving_says_it_is_device_idle():
    data = json.loads(run("profile", HERE / "fixtures" / "stalling-copies", *FLAGSHIP, "--json"))
    row = next(r for r in data["ranking"] if r["recipe"] == "sampler-min-tokens-spec-mask-cache")
    assert row["saving_us_per_step"] == pytest.approx(make_fixture.STALLING)
    assert row["basis"].endswith("187 µs per decode step (2 × 93.5 µs of device idle from AscendCL@aclrtMemcpy)")
