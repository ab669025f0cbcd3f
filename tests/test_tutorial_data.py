"""Tutorials as data (docs/tutorials.md): the committed versions/tutorials/<release>.json equal a fresh
extraction of each release's tree; the tricky readings pinned on small inline pages; the tab → hardware
map over every tab text of every release; the loader's errors; ``optkit tutorials diff`` on a change read
by hand in the trees."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from optkit.cli.main import cli
from optkit.errors import ValidationFailed
from optkit.versions.releases import known_versions
from optkit.versions.tutorial_data import load, releases
from optkit.versions.tutorial_pages import read_page
from optkit.versions.tutorial_tabs import families, family

RELEASES = [str(v) for v in known_versions()]


def page(text: str, path: str = "models/X.md") -> dict:
    return read_page(path, textwrap.dedent(text))


def only(data: dict, launcher: str = "vllm serve") -> dict:
    found = [c for c in data["commands"] if c["launcher"] == launcher]
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------- the committed data


@pytest.mark.tree
@pytest.mark.parametrize("release", RELEASES)
def test_committed_data_equals_a_fresh_extraction(release):
    from optkit.catalog.paths import project_root
    from optkit.tree.fetch import fetch
    from optkit.versions.tutorial_pages import dump, read_tree

    tree = fetch(release)
    committed = (project_root() / "versions" / "tutorials" / f"{release}.json").read_text(encoding="utf-8")
    assert committed == dump(read_tree(tree.path, release, tree.sha256)), (
        f"versions/tutorials/{release}.json is stale: run optkit tutorials extract --release {release}")


def test_every_known_release_has_committed_data():
    assert releases() == RELEASES


def test_quantizations_are_optkits_weight_formats():
    from optkit.resolve.profiles import QUANTIZATIONS

    found = {c["quantization"] for r in RELEASES for p in load(r).pages.values() for c in p["checkpoints"]}
    assert found - {None} <= set(QUANTIZATIONS)


@pytest.mark.tree
def test_serve_commands_carry_the_names_tutorial_commands_gives():
    from optkit.tree.fetch import fetch
    from optkit.versions.tutorial_commands import commands

    name = "models/Qwen3-235B-A22B.md"
    text = (fetch("0.30.0rc2").path / "docs/source/tutorials" / name).read_text(encoding="utf-8")
    read = [(c.where, c.line) for c in commands(text)]
    assert read == [(c["where"], c["line"]) for c in load("0.30.0rc2").commands(name) if c["launcher"] == "vllm serve"]


def test_0_30_0rc2_counts():
    """54 model pages (models/ holds 55 files, one index.md); 249 `vllm serve` commands on them, 266 with
    the feature pages' 17 (the issue's 266 counts lines naming `vllm serve` in models/*.md: 17 are prose)."""
    data = load("0.30.0rc2")
    models = {name: p for name, p in data.pages.items() if name.startswith("models/")}
    serve = [c for c in data.commands() if c["launcher"] == "vllm serve"]
    assert len(models) == 54
    assert sum(1 for p in models.values() for c in p["commands"] if c["launcher"] == "vllm serve") == 249
    assert len(serve) == 266


# --------------------------------------------------------------------------- readings of small pages


def test_mkdocs_tabs_give_the_hardware_and_where():
    data = page('''\
        ## 5.1 Single-Node Online Deployment

        === "A3 series"

            ```bash
            vllm serve /models/Qwen3 --tensor-parallel-size 16
            ```

        === "Atlas 300I DUO"

            ```bash
            vllm serve /models/Qwen3 --tensor-parallel-size 4
            ```
        ''')
    a3, duo = data["commands"]
    assert (a3["where"], a3["hardware"], a3["tabs"], a3["deployment"]) == (
        "Single-Node Online Deployment › A3 series", "A3", ["A3 series"], "single-node")
    assert (duo["hardware"], duo["options"]["--tensor-parallel-size"]) == ("310P", {"value": "4", "line": 12})
    assert data["tabs"] == ["A3 series", "Atlas 300I DUO"]


def test_the_list_item_a_block_is_nested_in_titles_it():
    """DeepSeek-V3.1.md 0.30.0rc2 :496-793: a numbered item names A3 once, above four per-node tabs; its later
    blocks are A3 too, not placed by the section's last statement (a 950DT requirement above the item)."""
    data = page('''\
        ## 5.3 Multi-Node PD Separation Deployment

        - `V3 2P1D` require 4 Atlas 800 A3 (64GB × 16).
        - `V3 2P1D` require 8 950DT Products (96GB × 8).

        1. `run_dp_template.sh` script(A3)

            === "Node 0(Prefill)"

                ```shell
                vllm serve /w --port $2
                ```

            === "Node 1(Prefill)"

                ```shell
                vllm serve /w --port $2
                ```

        2. `run_dp_template.sh` script(950DT Products)

            === "Prefill Node"

                ```shell
                vllm serve /w --port $2
                ```

        Not in a list item:

        ```shell
        vllm serve /w --port $2
        ```
        ''')
    assert [c["hardware"] for c in data["commands"]] == ["A3", "A3", "A5", "A5"]


def test_a_line_denying_hardware_places_no_command_on_it():
    """Qwen3.5-27B-Qwen3.6-27B.md 0.30.0rc2 :466: "not supported on Atlas 300I DUO" above the A3 PD scripts."""
    data = page('''\
        ## 5.3 Multi-Node PD Separation Deployment

        !!! note
            Multi-node PD separation deployment is **not supported** on Atlas 300I DUO.

        A typical 1P1D configuration requires **2 Atlas 800 A3 (64GB × 16) nodes**.

        ```shell
        vllm serve /w --port $2
        ```
        ''')
    assert only(data)["hardware"] == "A3"


def test_myst_tabs_give_the_hardware():
    data = page('''\
        ## Online Serving

        ::::{tab-set}
        :::{tab-item} Atlas 800I A2
        ```{code-block} bash
        vllm serve Qwen/Qwen3-8B --port 8000
        ```
        :::
        :::{tab-item} Atlas A3 inference products / Atlas A2 inference products
        ```{code-block} bash
        vllm serve Qwen/Qwen3-8B --port 8001
        ```
        :::
        ::::
        ''')
    a2, both = data["commands"]
    assert (a2["hardware"], a2["where"]) == ("A2", "Online Serving › Atlas 800I A2")
    assert (both["hardware"], both["hardware_families"]) == (None, ["A2", "A3"])


def test_continuation_lines_env_and_placeholders_are_kept_as_written():
    data = page('''\
        ### Deployment

        ```shell
        nic_name="<your_nic_name>"
        export HCCL_SOCKET_IFNAME=$nic_name
        export HCCL_IF_IP=${local_ip}
        vllm serve /weights/model \\
            --host <host_ip> \\
            --port <port> \\
            --additional-config '{"enable_cpu_binding": true,
                                  "ascend_scheduler_config": {"enabled": false}}'
        ```
        ''')
    command = only(data)
    assert command["env"] == {"HCCL_IF_IP": {"value": "${local_ip}", "line": 6},
                              "HCCL_SOCKET_IFNAME": {"value": "<your_nic_name>", "line": 5}}
    assert command["options"]["--port"] == {"value": "<port>", "line": 9}
    assert command["options"]["--additional-config.enable_cpu_binding"] == {"value": True, "line": 10}
    assert command["options"]["--additional-config.ascend_scheduler_config.enabled"]["value"] is False
    assert command["placeholders"] == ["${local_ip}", "<host_ip>", "<port>", "<your_nic_name>"]
    assert command["problems"] == []


def test_per_node_scripts_give_nodes_and_ranks():
    data = page('''\
        ## Multi-Node Data Parallel Deployment

        === "Node 0"

            ```shell
            vllm serve /w --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-address $node0_ip
            ```

        === "Node 1"

            ```shell
            vllm serve /w --headless --data-parallel-size 4 --data-parallel-size-local 2 \\
                --data-parallel-start-rank 2 --data-parallel-address $node0_ip
            ```
        ''')
    first, second = data["commands"]
    assert [(c["deployment"], c["nodes"], c["node_rank"]) for c in data["commands"]] == [
        ("multi-node", 2, 0), ("multi-node", 2, 1)]
    assert first["placeholders"] == ["$node0_ip"] and second["options"]["--headless"]["value"] is True


def test_a_single_node_command_may_pass_a_dp_address():
    """Qwen3-235B-A22B.md (0.30.0rc2) :754 passes --data-parallel-address with DP 4 of 4 local."""
    command = only(page('''\
        ```bash
        vllm serve /w --data-parallel-size 4 --data-parallel-size-local 4 --data-parallel-address <node_ip>
        ```
        '''))
    assert (command["deployment"], command["nodes"], command["node_rank"]) == ("single-node", 1, 0)


PD_PAGE = '''\
    ## Multi-Node PD Separation Deployment

    **Hardware**: 3 × Atlas 800 A3 (64GB × 16), one for Prefill, two for Decode.

    **Prefill node**:

    ```bash
    vllm serve /w --port $2 --data-parallel-size $3 --data-parallel-rank $4 --data-parallel-address $5 \\
        --data-parallel-rpc-port $6 --tensor-parallel-size $7 \\
        --kv-transfer-config '{"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer"}'
    ```

    **Decode node**:

    ```bash
    vllm serve /w --port $2 --data-parallel-size $3 --data-parallel-rank $4 --data-parallel-address $5 \\
        --data-parallel-rpc-port $6 --tensor-parallel-size $7 \\
        --kv-transfer-config '{"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_consumer"}'
    ```

    Start them:

    ```bash
    # Prefill node 0
    python launch_online_dp.py --dp-size 2 --tp-size 8 --dp-size-local 2 --dp-rank-start 0 \\
        --dp-address <prefill_ip> --dp-rpc-port 54951 --vllm-start-port 9123
    # Decode node 1
    python launch_online_dp.py --dp-size 8 --tp-size 4 --dp-size-local 4 --dp-rank-start 4 \\
        --dp-address <decode_ip> --dp-rpc-port 54951 --vllm-start-port 9123
    ```
    '''


def test_pd_roles_come_from_kv_role():
    prefill, decode = [c for c in page(PD_PAGE)["commands"] if c["launcher"] == "vllm serve"]
    assert (prefill["pd_role"], decode["pd_role"], prefill["deployment"]) == ("prefill", "decode", "pd")
    assert prefill["hardware"] == "A3"  # the section's **Hardware** line
    assert "$7" in prefill["placeholders"]


def test_launch_online_dp_runs_fill_the_template_they_start():
    runs = [c for c in page(PD_PAGE)["commands"] if c["launcher"] == "launch_online_dp.py"]
    prefill, decode = runs
    assert (prefill["template_line"], decode["template_line"]) == (8, 16)
    assert prefill["options"]["--tensor-parallel-size"] == {"value": "8", "line": 25}
    assert prefill["options"]["--port"] == {"value": "9123", "line": 26}
    assert decode["options"]["--data-parallel-rank"] == {"value": "4", "line": 28}
    assert decode["options"]["--kv-transfer-config.kv_role"]["value"] == "kv_consumer"
    assert [(c["pd_role"], c["nodes"], c["node_rank"]) for c in runs] == [("prefill", 1, 0), ("decode", 2, 1)]
    assert decode["launcher_options"]["--dp-size"] == {"value": "8", "line": 28}
    assert decode["where"] == "Multi-Node PD Separation Deployment #2"


def test_a_pages_own_launcher_passes_pipeline_parallelism_as_the_eighth_argument():
    """MiniMax-M3.md (0.30.0rc2 :505-527) extends launch_online_dp.py with --pp-size, passed as $8."""
    runs = [c for c in page(PD_PAGE.replace("--tensor-parallel-size $7", "--tensor-parallel-size $7 "
                                            "--pipeline-parallel-size $8")
                            .replace("--tp-size 8 ", "--tp-size 8 --pp-size 2 "))["commands"]
            if c["launcher"] == "launch_online_dp.py"]
    assert [r["options"]["--pipeline-parallel-size"]["value"] for r in runs] == ["2", "$8"]  # the decoder's: unset


def test_a_launcher_without_a_template_is_a_problem():
    run = only(page('''\
        ```bash
        python launch_online_dp.py --dp-size 2 --tp-size 8 --dp-address 1.2.3.4
        ```
        '''), "launch_online_dp.py")
    assert run["problems"] == ["line 2: launch_online_dp.py runs run_dp_template.sh, but no `vllm serve` with "
                               "$1…$7 arguments stands before it on the page"]
    assert (run["nodes"], run["node_rank"]) == (1, 0)  # --dp-size-local defaults to --dp-size


def test_a_weights_table_gives_checkpoints():
    data = page('''\
        ### 3.1 Model Weight

        **BF16 Versions:**

        | Model | Hardware Requirement | Download |
        |-------|---------------------|----------|
        | Qwen3-235B-A22B | 1 Atlas 800I A3 (64GB × 16), 2 Atlas 800I A2 (32GB × 8) | [ModelScope](https://www.modelscope.cn/models/Qwen/Qwen3-235B-A22B) |
        | `Qwen3-235B-A22B-w8a8`(Quantized version) | **1 Atlas 800 A3 (64GB × 16) node** | [Modelers](https://modelers.cn/models/Modelers_Park/Qwen3-235B-A22B-w8a8) |
        ''')
    bf16, w8a8 = data["checkpoints"]
    assert bf16 == {"line": 7, "name": "Qwen3-235B-A22B", "id": "Qwen/Qwen3-235B-A22B", "quantization": "bf16",
                    "hardware_text": "1 Atlas 800I A3 (64GB × 16), 2 Atlas 800I A2 (32GB × 8)",
                    "requirements": [{"hardware": "A3", "nodes": 1, "devices_per_node": 16, "hbm_gib": 64},
                                     {"hardware": "A2", "nodes": 2, "devices_per_node": 8, "hbm_gib": 32}]}
    assert (w8a8["name"], w8a8["quantization"], w8a8["id"]) == ("Qwen3-235B-A22B-w8a8", "w8a8",
                                                                 "Modelers_Park/Qwen3-235B-A22B-w8a8")
    assert data["tables"][0]["kind"] == "weights"


def test_a_weights_bullet_list_gives_checkpoints():
    """The pre-table layout (0.18.0 Qwen3-235B-A22B.md:21)."""
    (checkpoint,) = page('''\
        ### Model Weight

        - `Qwen3-235B-A22B-w8a8`(Quantized version): require 1 Atlas 800 A3 (64G × 16) node or 2 Atlas 800 A2(32G × 8)nodes. [Download model weight](https://www.modelscope.cn/models/vllm-ascend/Qwen3-235B-A22B-W8A8).
        ''')["checkpoints"]
    assert checkpoint["id"] == "vllm-ascend/Qwen3-235B-A22B-W8A8" and checkpoint["quantization"] == "w8a8"
    assert [(r["hardware"], r["nodes"], r["hbm_gib"]) for r in checkpoint["requirements"]] == [("A3", 1, 64), ("A2", 2, 32)]


def test_a_scenario_table_keeps_every_cell_as_written():
    data = page('''\
        ## 9 Performance Tuning

        #### Table 2: Detailed Node Configuration

        | Scenario | TP | DP | MTP Speculation Num |
        |----------|----|----|---------------------|
        | High Throughput | 4 | 4 | none |
        | Low Latency | 16 | 1 | 3 |

        <u>Single-node PD Hybrid — High Throughput:</u>

        ```bash
        vllm serve /w --tensor-parallel-size 4
        ```
        ''')
    (table,) = data["tables"]
    assert (table["kind"], table["heading"], table["columns"]) == (
        "scenario", "Performance Tuning › Table 2: Detailed Node Configuration", ["Scenario", "TP", "DP", "MTP Speculation Num"])
    assert table["rows"] == [{"line": 7, "cells": ["High Throughput", "4", "4", "none"]},
                             {"line": 8, "cells": ["Low Latency", "16", "1", "3"]}]
    assert only(data)["scenario"] == "High Throughput"


def test_what_the_reader_cannot_read_is_listed():
    data = page('''\
        ```python
        import subprocess
        subprocess.run("vllm serve /w --port 8000", shell=True)
        ```

        ```bash
        python -m vllm.entrypoints.openai.api_server --model /w
        # vllm serve /w --enforce-eager
        pkill -f "vllm serve"
        ```
        ''')
    assert data["commands"] == []
    assert data["unread"] == [
        {"line": 3, "why": "a `vllm serve` inside a python block: not read"},
        {"line": 7, "why": "a `python -m vllm.entrypoints.openai.api_server` launch: not read"},
        {"line": 8, "why": "a commented-out `vllm serve`: not read"}]


def test_an_open_quote_is_a_problem_with_its_line():
    command = only(page('''\
        ```bash
        vllm serve /w --additional-config '{"a": 1}
        ```
        '''))
    assert command["problems"] and command["problems"][0].startswith("line 2: unterminated quote")


@pytest.mark.parametrize("path,title,kind", [
    ("models/Qwen3-Embedding.md", "Qwen3-Embedding", "embedding"), ("models/Qwen3-Reranker.md", "x", "reranker"),
    ("models/Qwen3-ASR-1.7B.md", "x", "asr"), ("models/PaddleOCR-VL.md", "x", "ocr"),
    ("models/Qwen2.5-Math-RM-72B.md", "x", "reward"), ("models/SigLIP2.md", "SigLIP2", "embedding"),
    ("models/Qwen3-Dense.md", "Qwen3 Dense", "llm"), ("features/ray.md", "Ray", "other")])
def test_page_kinds(path, title, kind):
    data = read_page(path, f"# {title}\n\n```bash\nvllm serve /w\n```\n")
    assert data["kind"] == kind


# --------------------------------------------------------------------------- the tab → hardware map


TAB_FAMILIES = {
    "910B4": "A2", "950DT products": "A5", "950DT Products": "A5", "950PR Products": "A5", "950PR&950DT Products": "A5",
    "A2": "A2", "A2 / A3 series": None, "A2 series": "A2", "A2 series with dspark": "A2", "A3": "A3",
    "A3 series": "A3", "A3 series with DSpark": "A3", "A3 series with dspark": "A3", "A3 series with MTP": "A3",
    "A3 series(BF16)": "A3", "A3 series(W8A8)": "A3", "A3/A2 series": None, "Ascend 950DT series": "A5",
    "Ascend 950DT&950PR Products": "A5", "Ascend 950DT&950PR Products/A3/A2": None, "Ascend950DT series": "A5",
    "Ascend950DT/PR series": "A5", "Ascend950PR series": "A5", "Atlas 300 inference products": "310P",
    "Atlas 300I DUO": "310P", "Atlas 800 A2": "A2", "Atlas 800 A2 (eight-node)": "A2", "Atlas 800 A2 series": "A2",
    "Atlas 800 A3": "A3", "Atlas 800 A3 (four-node)": "A3", "Atlas 800 A3 / Atlas 800 A2": None,
    "Atlas 800 A3 series": "A3", "Atlas 800I A2": "A2", "Atlas 800I A2/A3": None, "Atlas 800I A3": "A3",
    "Atlas 950DT": "A5", "Atlas 950DT (four-node)": "A5", "Atlas A2 inference products": "A2",
    "Atlas A2 inference products / Atlas A3 inference products": None, "Atlas A3 inference products": "A3",
    "Atlas inference products": "310P", "DeepSeek-R1-W8A8 A2 series": "A2", "DeepSeek-R1-W8A8 A3 series": "A3",
    "Atlas 200I Pro": None, "Node 0(Prefill)": None, "Qwen3.5-27B-w8a8": None, "Qwen3-14B-W8A8SC": None,
}
"""Every tab text of every release that names a family (read off the committed data), and a few that
name none or several; a new tab text naming hardware fails test_every_tab_text_is_mapped until added."""


@pytest.mark.parametrize("tab,expected", sorted(TAB_FAMILIES.items()), ids=sorted(TAB_FAMILIES))
def test_tab_hardware(tab, expected):
    assert family(tab) == expected


def test_every_tab_text_is_mapped():
    tabs = {tab for r in RELEASES for p in load(r).pages.values() for tab in p["tabs"]}
    unreviewed = sorted(tab for tab in tabs if families(tab) and tab not in TAB_FAMILIES)
    assert unreviewed == []


# --------------------------------------------------------------------------- the loader


def _write(tmp_path, name: str, text: str):
    folder = tmp_path / "versions" / "tutorials"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("name,text,message", [
    (None, None, "versions/tutorials/9.9.json: no tutorial data for release 9.9 (there is for: none) "
                 "(`optkit tutorials extract --release 9.9` writes it)"),
    ("9.9.json", '{"format": 1,\n "release": }', "versions/tutorials/9.9.json:2: not JSON: Expecting value "
                                                 "(`optkit tutorials extract --release 9.9` writes it afresh)"),
    ("9.9.json", '{"format": 2, "release": "9.9", "tree": "", "pages": {}}',
     "versions/tutorials/9.9.json: format 2; this optkit reads format 1 (`optkit tutorials extract --release 9.9` "
     "writes it afresh)"),
    ("9.9.json", '{"format": 1, "release": "9.8", "tree": "", "pages": {}}',
     "versions/tutorials/9.9.json: holds release '9.8', not '9.9' (`optkit tutorials extract --release 9.9` writes it afresh)"),
    ("9.9.json", '{"format": 1, "release": "9.9"}',
     "versions/tutorials/9.9.json: expected an object with keys format, release, tree, pages, found ['format', 'release'] "
     "(`optkit tutorials extract --release 9.9` writes it afresh)"),
], ids=["missing", "not-json", "format", "release", "keys"])
def test_loader_errors_name_the_file(tmp_path, name, text, message):
    root = _write(tmp_path, name, text) if name else tmp_path
    with pytest.raises(ValidationFailed) as err:
        load("9.9", root)
    assert str(err.value) == message


def test_loader_gives_read_only_pages_and_filters_commands():
    data = load("0.30.0rc2")
    assert data.page("Qwen3-235B-A22B") is data.page("models/Qwen3-235B-A22B.md")
    with pytest.raises(TypeError):
        data.pages["models/Qwen3-235B-A22B.md"]["kind"] = "other"
    a3 = data.commands(page="Qwen3-235B-A22B", hardware="A3")
    assert a3 and all(c["hardware"] == "A3" for c in a3)
    with pytest.raises(ValidationFailed) as err:
        data.page("Qwen3-235B")
    assert str(err.value) == ("versions/tutorials/0.30.0rc2.json: release 0.30.0rc2 has no tutorial page 'Qwen3-235B' "
                              "(did you mean 'models/Qwen3-235B-A22B.md'?)")


# --------------------------------------------------------------------------- the CLI


def test_diff_names_a_change_read_in_the_trees():
    """0.29.0rc1 models/DeepSeek-V4-Pro.md:182 passes `--data-parallel-start-rank 0` to the A2 node 0
    command; 0.30.0rc1 drops it (the command moves from :176 to :179). GLM5.2.md:215 (0.29.0rc1)
    sets `--kv-cache-dtype int8`; 0.30.0rc1 drops it."""
    result = CliRunner().invoke(cli, ["tutorials", "diff", "0.29.0rc1", "0.30.0rc1", "DeepSeek-V4-Pro"])
    assert result.exit_code == 0, result.output
    assert ("  ~ command vllm serve Multi-Node Online Deployment › A2 series  :176 → :179\n"
            "      - --data-parallel-start-rank 0  :182\n") in result.output
    result = CliRunner().invoke(cli, ["tutorials", "diff", "0.29.0rc1", "0.30.0rc1", "--json"])
    change = json.loads(result.output)["pages"]["models/GLM5.2.md"]["commands_changed"][0]
    assert {"key": "--kv-cache-dtype", "change": "removed", "from": {"value": "int8", "line": 215}, "to": None} \
        in change["options"]


def test_show_prints_a_pages_commands():
    result = CliRunner().invoke(cli, ["tutorials", "show", "Qwen3-235B-A22B", "--release", "0.30.0rc2"])
    assert result.exit_code == 0, result.output
    assert "Command :754 vllm serve your_model_path — Table 2: Detailed Node Configuration" in result.output
    assert "  --tensor-parallel-size 4  :758" in result.output


@pytest.mark.parametrize("args,code,text", [
    (["tutorials", "extract"], 2, "name the releases (--release R ...), or --all (not both)"),
    (["tutorials", "extract", "--all", "--release", "0.30.0rc2"], 2, "or --all (not both)"),
    (["tutorials", "extract", "--release", "x.y"], 2, "'x.y' is not a version"),
    (["tutorials", "extract", "--release", "0.9"], 1, "--release: vllm-ascend 0.9 is not a release optkit knows"),
    (["tutorials", "show", "Nope", "--release", "0.30.0rc2"], 1, "release 0.30.0rc2 has no tutorial page 'Nope'"),
    (["tutorials", "diff", "0.30.0rc2", "9.9"], 1, "versions/tutorials/9.9.json: no tutorial data for release 9.9"),
], ids=["nothing", "both", "not-a-version", "unknown", "no-page", "no-data"])
def test_cli_errors(args, code, text):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == code and text in result.output, result.output


@pytest.mark.tree
def test_extract_check_passes_on_the_committed_data():
    result = CliRunner().invoke(cli, ["tutorials", "extract", "--check", "--release", "0.30.0rc2"])
    assert result.exit_code == 0, result.output


def test_redirections_end_the_arguments_and_stray_words_are_problems():
    """MiniMax-M3.md (0.30.0rc2) :186 ends its command with `> ${LOG_PATH} 2>&1 &`; DeepSeek-V4.1-Flash.md :683
    passes `"${HEADLESS_ARGS[@]}"`, a shell array the reader cannot see into."""
    command = only(page('''\
        ```bash
        vllm serve <MODEL_PATH> \\
            --port <port> \\
            "${HEADLESS_ARGS[@]}" \\
            --enforce-eager > ${LOG_PATH} 2>&1 &
        ```
        '''))
    assert command["model"] == "<MODEL_PATH>"
    assert command["options"] == {"--port": {"value": "<port>", "line": 3}, "--enforce-eager": {"value": True, "line": 5}}
    assert command["problems"] == ["line 4: '${HEADLESS_ARGS[@]}' is no flag and no flag's value (a shell array or a "
                                   "positional argument): what it passes is not read"]


def test_a_generated_model_code_block_is_unread_and_the_page_still_an_llm():
    """Kimi-K2-Thinking.md (0.30.0rc2) :187 has no command on the page: the docs build generates it."""
    data = page('''\
        # Kimi-K2-Thinking

        ```{model-code}
        :block_name: kimi_k2_thinking_single_node
        :test_case_path: tests/e2e/cases/models/configs/Kimi/Kimi-K2-Thinking.yaml
        ```
        ''')
    assert data["commands"] == [] and data["kind"] == "llm"
    assert data["unread"] == [{"line": 3, "why": "a `{model-code}` block, generated by the docs build from "
                               "tests/e2e/cases/models/configs/Kimi/Kimi-K2-Thinking.yaml: its command is not on "
                               "the page, not read"}]


def test_extract_summary_prints_the_committed_counts():
    result = CliRunner().invoke(cli, ["tutorials", "extract", "--summary"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("| 0.30.0rc2 |"))
    assert row.startswith("| 0.30.0rc2 | 60 | 54 | 44 | 28 | 369 | 266 | 249 | 103 |")


@pytest.mark.parametrize("text,expected", [
    ("1 950DT Products(96GB × 8) node or 1 Atlas 800 A3 (64GB × 16) node or Atlas 300I DUO",  # Qwen3.5-27B (0.30.0rc2)
     [("A5", 1, 8, 96), ("A3", 1, 16, 64), ("310P", None, None, None)]),
    ("1 card on Atlas 800I A2 (64GB × 8), Atlas 800 A3 (64GB × 16)", [("A2", None, 8, 64), ("A3", None, 16, 64)]),
    ("8 cards in 1 Atlas 800 A3 (64GB × 16) node", [("A3", 1, 16, 64)]),  # Qwen3-Next (0.30.0rc2)
    ("1× Atlas 800 A3 (64GB × 16) or 1× Atlas 800I A2 (64GB × 8)", [("A3", 1, 16, 64), ("A2", 1, 8, 64)]),
    ("2 Atlas 800 A2(32G × 8)nodes", [("A2", 2, 8, 32)]),
    ("at least 8 × 64 GB NPU chips. Recommended for Atlas 800 A3 (64GB × 16)", [("A3", None, 16, 64)]),
    ("Atlas 800I A3 (64GB, 1\\~2 cards)<br>Atlas 800I A2 (64GB, 2\\~4 cards)", [("A3", None, None, None), ("A2", None, None, None)]),
], ids=["a5-a3-duo", "cards", "cards-in-a-node", "times", "no-space", "prose", "unsized"])
def test_hardware_requirements(text, expected):
    from optkit.versions.tutorial_checkpoints import requirements as _requirements

    assert [(r["hardware"], r["nodes"], r["devices_per_node"], r["hbm_gib"]) for r in _requirements(text)] == expected


def test_a_command_without_a_kv_transfer_config_joins_no_pd_pair():
    """Words around a command place it in a PD pair only when it carries a --kv-transfer-config: Qwen3.8-27B.md's
    co-located command (0.30.0rc2 :342) follows a parameter list saying "Decode requests are prioritized"."""
    text = '''# X

## Deployment

- `--max-num-batched-tokens`: (2) Decode requests are prioritized for scheduling.

```bash
vllm serve /w --tensor-parallel-size 2 --max-num-seqs 32
```

**Decode node**:

```bash
vllm serve /w --tensor-parallel-size 2 --kv-transfer-config '{"kv_connector": "MooncakeConnectorV1"}'
```
'''
    plain, paired = [c for c in page(text)["commands"] if c["launcher"] == "vllm serve"]
    assert plain["pd_role"] is None and plain["deployment"] != "pd"
    assert paired["pd_role"] == "decode"  # no kv_role: its words place it


def test_a_json_value_the_shell_computes_is_read_as_its_placeholder():
    """MiniMax-M3.md (0.30.0rc2 :1153) closes the JSON's quotes around an arithmetic expansion: the shell passes
    one word (the port), which is no JSON as written; read as the placeholder it stands for, not a problem."""
    command = only(page('''\
        ```bash
        vllm serve /w --port $2 \\
            --kv-transfer-config '{"kv_connector": "MultiConnector",
                "kv_connector_extra_config": {"lookup_rpc_port": '$((37000 + $4))', "backend": "mooncake"}}'
        ```
        '''), "vllm serve")
    assert command["problems"] == []
    options = command["options"]
    assert options["--kv-transfer-config.kv_connector_extra_config.lookup_rpc_port"]["value"] == "$((37000+$4))"
    assert options["--kv-transfer-config.kv_connector_extra_config.backend"]["value"] == "mooncake"


def test_the_prose_above_a_placeholder_path_states_its_weights():
    """GLM5.2.md (0.23.0 :1263): "… 1M context window on Atlas 800 A3 (64GB x 16) and quantized GLM-5.2(W4A8C8)
    weights" above its 1M commands, whose path is <MODEL_PATH>: before, they were read as W8A8 (--quantization
    ascend with an unnamed checkpoint) and the single-node one refused as too large. A line naming several formats
    states none; a named checkpoint is read off its name."""
    from optkit.resolve.page_commands import command_weights

    text = '''\
        ## 1M Context

        Recommended configurations with quantized GLM-5.2(W4A8C8) weights:

        ### Single node

        ```bash
        vllm serve <MODEL_PATH> --quantization ascend --tensor-parallel-size 16
        ```

        ```bash
        vllm serve org/GLM-5.2-w8a8 --quantization ascend --tensor-parallel-size 16
        ```

        ## Other

        Use the W8A8 or the BF16 weights.

        ```bash
        vllm serve <MODEL_PATH> --tensor-parallel-size 16
        ```
        '''
    placeholder, named, other = [c for c in page(text)["commands"] if c["launcher"] == "vllm serve"]
    assert placeholder["stated_weights"] == {"quantization": "w4a8c8", "line": 3}
    assert command_weights(placeholder) == ("w4a8c8", "the page states w4a8c8 weights above it (:3)")
    assert "stated_weights" not in named and command_weights(named)[0] == "w8a8"
    assert "stated_weights" not in other
    data = load("0.23.0").pages["models/GLM5.2.md"]
    assert next(c for c in data["commands"] if c["line"] == 1296)["stated_weights"] == \
        {"quantization": "w4a8c8", "line": 1263}


def test_a_block_that_only_sets_variables_sets_them_for_its_sections_commands():
    """Kimi-K3.md (0.30.0rc2 :139-166) sets TP_SIZE, DP_SIZE and the HCCL env once "on every node", then runs one
    `vllm serve` per node reading them: before, their TP and DP read as unresolved variables and no run was
    compared. A block of another section does not inherit them."""
    text = '''\
        ## Four nodes

        ```shell
        export TP_SIZE=16
        export HCCL_BUFFSIZE=1024
        ```

        ```shell
        vllm serve org/M --tensor-parallel-size $TP_SIZE
        ```

        ## Other

        ```shell
        vllm serve org/M --tensor-parallel-size $TP_SIZE
        ```
        '''
    inherits, other = [c for c in page(text)["commands"] if c["launcher"] == "vllm serve"]
    assert inherits["options"]["--tensor-parallel-size"]["value"] == "16"
    assert inherits["env"] == {"HCCL_BUFFSIZE": {"value": "1024", "line": 5}, "TP_SIZE": {"value": "16", "line": 4}}
    assert other["options"]["--tensor-parallel-size"]["value"] == "$TP_SIZE" and other["env"] == {}


def test_a_word_that_is_one_variable_splits_as_the_shell_splits_it():
    """GLM5.2.md (0.30.0rc2 :575): `server_role_args="--api-server-count 16"` then `$server_role_args` in the
    command: two words, a flag and its value (before: one flag named '--api-server-count 16')."""
    command = only(page('''\
        ```bash
        server_role_args="--api-server-count 16"
        vllm serve /w \\
            $server_role_args \\
            --port 8000
        ```
        '''), "vllm serve")
    assert command["options"]["--api-server-count"]["value"] == "16" and command["problems"] == []


def test_one_script_per_node_pairs_with_its_runs_set_by_set():
    """GLM5.2.md (0.30.0rc2) writes decode node 0's and node 1's scripts (:588, :649) started by :708 and :715, and
    its 1M section two more (:1383, :1446) started by :1510 and :1517: each set pairs with the runs after it (before,
    the page's four decode runs did not count as the first set's two, and both its runs took :649)."""
    data = load("0.30.0rc2").pages["models/GLM5.2.md"]
    runs = {c["line"]: c["template_line"] for c in data["commands"] if c["launcher"] == "launch_online_dp.py"
            and c["line"] in (708, 715, 1510, 1517)}
    assert runs == {708: 588, 715: 649, 1510: 1383, 1517: 1446}


def test_a_node_that_runs_its_script_itself_uses_up_its_script():
    """GLM5.2.md (0.30.0rc2) runs its first prefill scripts (:463, :526) with ``bash run_dp_template.sh`` (:695,
    :701): its 1M section's prefill scripts (:1256, :1320) are a set of their own, started by :1496 and :1503
    (before, the four prefill scripts were one set of four for two runs, and both runs took :1320)."""
    data = load("0.30.0rc2").pages["models/GLM5.2.md"]
    runs = {c["line"]: c["template_line"] for c in data["commands"] if c["launcher"] == "launch_online_dp.py"
            and c["line"] in (1496, 1503)}
    assert runs == {1496: 1256, 1503: 1320}
    assert not [c for c in data["commands"] if c["line"] in (695, 701)]  # a script run is no command of its own


def test_a_run_after_alternative_tabs_starts_each_tabs_script():
    """DeepSeek-V4-Flash.md (0.30.0rc2) writes its A3 PD scripts twice, in an "A3 series" tab (MTP) and an "A3
    series with dspark" tab, and then one prefill and one decode run for both: each run starts the script in its
    place in each tab, one command per script (before, the MTP tab's scripts :524 and :594 were started by none)."""
    data = load("0.30.0rc2").pages["models/DeepSeek-V4-Flash.md"]
    runs = sorted((c["line"], c["template_line"], c.get("alternative")) for c in data["commands"]
                  if c["launcher"] == "launch_online_dp.py" and c["line"] in (809, 816))
    assert runs == [(809, 524, "a tab alternative of :677"), (809, 677, None),
                    (816, 594, "a tab alternative of :747"), (816, 747, None)]


def test_per_node_tabs_are_no_alternatives():
    """Tabs naming nodes ("Prefiller node 1", "Decoder node 2") hold one script per node, not alternatives."""
    data = page('''\
        ## Deploy

        === "Prefiller node 1"

            ```shell
            vllm serve /w --port $2 --data-parallel-size $3 --tensor-parallel-size $7
            ```

        === "Prefiller node 2"

            ```shell
            vllm serve /w --port $2 --data-parallel-size $3 --tensor-parallel-size $7
            ```

        ```shell
        python launch_online_dp.py --dp-size 2 --tp-size 8 --dp-size-local 1 --dp-rank-start 0 --dp-address a
        ```
        ''')
    assert [c["template_line"] for c in data["commands"] if c["launcher"] == "launch_online_dp.py"] == [12]  # the last script; :6 is no alternative


def test_a_section_reusing_anothers_runs_is_started_by_them():
    """MiniMax-M3.md (0.30.0rc2) §5.4.3: "Reuse Section 5.3 `launch_online_dp.py`" (:1069) above its KV-pool scripts:
    §5.3's runs of each role and family start them too; a statement in another tab (:1243, A3) places no 950 script."""
    data = load("0.30.0rc2").pages["models/MiniMax-M3.md"]
    runs = {(c["line"], c["template_line"]): c.get("alternative") for c in data["commands"]
            if c["launcher"] == "launch_online_dp.py"}
    assert runs == {(699, 591): None, (699, 1104): "Section 5.3's run, as :1069 says",
                    (711, 656): None, (711, 1189): "Section 5.3's run, as :1069 says",
                    (875, 768): None, (875, 1277): "Section 5.3's run, as :1069 says",
                    (887, 831): None, (887, 1364): "Section 5.3's run, as :1069 says"}


def test_a_flag_given_twice_is_read_as_argparse_reads_it():
    """The last value stands, cited at its own line (Qwen-VL-Dense.md 0.30.0rc2 :263 and :267 give --dtype float16
    and then bfloat16); a JSON flag given again replaces the first whole, keys and all."""
    data = page('''\
        ```bash
        vllm serve /w \\
          --dtype float16 \\
          --additional-config '{"a": 1, "b": 2}' \\
          --dtype bfloat16 \\
          --additional-config '{"a": 3}'
        ```
        ''')
    options = only(data)["options"]
    assert options["--dtype"] == {"value": "bfloat16", "line": 5}
    assert options["--additional-config.a"] == {"value": 3, "line": 6}
    assert "--additional-config.b" not in options


def test_a_bash_array_built_under_a_decided_condition_is_read():
    """DeepSeek-V4.1-Flash.md 0.30.0rc2 :658-683: NODE_RANK=0 as written, HEADLESS_ARGS=() extended only where
    NODE_RANK != 0, and "${HEADLESS_ARGS[@]}" in the command: node 0's command, without --headless. An undecided
    condition leaves the array unknown, and the command says so; X="${X:-3600}" reads as 3600 (a fresh host's)."""
    script = '''\
        ```bash
        NODE_RANK={rank}
        export VLLM_ENGINE_READY_TIMEOUT_S="${{VLLM_ENGINE_READY_TIMEOUT_S:-3600}}"
        HEADLESS_ARGS=()
        if [[ {condition} != "0" ]]; then
          HEADLESS_ARGS+=(--headless --data-parallel-start-rank "$NODE_RANK")
        fi
        vllm serve /w \\
          "${{HEADLESS_ARGS[@]}}" \\
          --data-parallel-size 4
        ```
        '''
    leader = only(page(script.format(rank=0, condition='"$NODE_RANK"')))
    assert "--headless" not in leader["options"] and not leader["problems"]
    assert leader["env"]["VLLM_ENGINE_READY_TIMEOUT_S"]["value"] == "3600"
    follower = only(page(script.format(rank=2, condition='"$NODE_RANK"')))
    assert follower["options"]["--headless"]["value"] is True
    assert follower["options"]["--data-parallel-start-rank"]["value"] == "2"
    unknown = only(page(script.format(rank=2, condition='"$UNSET_BY_THE_PAGE"')))
    assert unknown["problems"] and "HEADLESS_ARGS" in unknown["problems"][0]


WRAPPED_PAGE = '''\
    ## Deploy

    Save the following script as `run_p.sh` on P0 and P1.

    ```shell
    : "${LOCAL_IP:?Set LOCAL_IP in the wrapper}"
    export HCCL_IF_IP="$LOCAL_IP"
    exec vllm serve "$MODEL_PATH" \\
      --port "$2" \\
      --data-parallel-size "$3" \\
      --tensor-parallel-size "$7" \\
      ${SERVER_ROLE_ARGS:-} \\
      --kv-transfer-config '{"kv_connector": "MooncakeConnectorV2", "kv_role": "kv_producer"}'
    ```

    Save the following `run_p0.sh` on P0.

    ```shell
    #!/usr/bin/env bash
    export LOCAL_IP="<P0_IP>"
    export MODEL_PATH="<YOUR_MODEL_PATH>"
    export SERVER_ROLE_ARGS="--api-server-count 1"
    exec bash ./run_p.sh "$@"
    ```

    Save the following `run_p1.sh` on P1.

    ```shell
    export LOCAL_IP="<P1_IP>"
    export MODEL_PATH="<YOUR_MODEL_PATH>"
    export SERVER_ROLE_ARGS="--headless"
    exec bash ./run_p.sh "$@"
    ```

    ```shell
    # P0
    python launch_online_dp.py --template ./run_p0.sh --dp-size 2 --tp-size 8 --dp-size-local 1 --dp-rank-start 0 --dp-address a
    # P1
    python launch_online_dp.py --template ./run_p1.sh --dp-size 2 --tp-size 8 --dp-size-local 1 --dp-rank-start 1 --dp-address a
    ```
    '''


def test_a_run_of_a_wrapper_reads_the_template_with_the_wrappers_variables():
    """GLM5.3-Flash.md 0.30.0rc2 :567-677: run_p.sh passes ``${SERVER_ROLE_ARGS:-}``, which it does not set; the
    P0 and P1 wrappers set it (``--api-server-count 1``, ``--headless``) and ``exec bash ./run_p.sh "$@"``; the runs
    name the wrappers with --template. The template alone stays unread (a problem, not an empty guess); each run
    reads it with its wrapper's variables, the flag cited where the variable stands."""
    data = page(WRAPPED_PAGE)
    template = only(data)
    assert template["problems"] and "SERVER_ROLE_ARGS" in template["problems"][0]
    p0, p1 = [c for c in data["commands"] if c["launcher"] == "launch_online_dp.py"]
    assert (p0["problems"], p1["problems"]) == ([], [])
    assert p0["options"]["--api-server-count"] == {"value": "1", "line": 12}
    assert "--headless" not in p0["options"]
    assert p1["options"]["--headless"] == {"value": True, "line": 12}
    assert (p0["model"], p0["env"]["HCCL_IF_IP"]["value"], p1["env"]["HCCL_IF_IP"]["value"]) == (
        "<YOUR_MODEL_PATH>", "<P0_IP>", "<P1_IP>")
    assert "LOCAL_IP" not in p0["env"] and "SERVER_ROLE_ARGS" not in p0["env"]  # the wrapper's plumbing
    assert (p0["wrapper"], p1["wrapper"]) == ({"line": 19, "script": "run_p0.sh"}, {"line": 29, "script": "run_p1.sh"})
    assert p0["template_line"] == p1["template_line"] == template["line"] == 8
    assert p0["options"]["--tensor-parallel-size"]["value"] == "8"


def test_a_run_without_its_wrapper_keeps_the_templates_problem():
    """A run of a template the reader cannot read carries its problem (before, the run was read with the
    unread word dropped): here the page saves no run_p0.sh."""
    text = WRAPPED_PAGE.replace("Save the following `run_p0.sh` on P0.", "On P0:")
    p0 = next(c for c in page(text)["commands"] if c["launcher"] == "launch_online_dp.py")
    assert "wrapper" not in p0 and p0["problems"] and "SERVER_ROLE_ARGS" in p0["problems"][0]


@pytest.mark.parametrize(("written", "variables", "expected"), [
    ("${X:-d}", {"X": "v"}, "v"), ("${X:-d}", {"X": ""}, "d"), ("${X:-}", {"X": ""}, ""),
    ("${X:-d}", {}, "${X:-d}"), ("$X/${Y}", {"X": "a", "Y": "b"}, "a/b"), ("$X", {}, "$X")])
def test_shell_expansion(written, variables, expected):
    from optkit.versions.tutorial_shell import expand

    assert expand(written, variables) == expected
