"""The presets ship inside the wheel: build it, then resolve presets from it in another directory
(issue 2)."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_carries_presets_and_they_resolve_outside_the_checkout(tmp_path):
    out = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = next(out.glob("perfmodel-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "perfmodel/configs/hardware/gpus.yaml" in names
    assert "perfmodel/configs/plans/gpt3-175b.yaml" in names
    assert "perfmodel/configs/models/llama3-405b.yaml" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # what `pip install` lays down
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import json, perfmodel, perfmodel.inputs as i, perfmodel.inputs.presets as p;"
        " print(json.dumps([perfmodel.__file__, p.preset_names('plans'),"
        " i.load_plan('gpt3-175b.yaml').system.num_gpus]))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    where, plans, gpus = json.loads(r.stdout)
    assert where.startswith(str(site))
    assert "gpt3-175b" in plans and gpus == 512
    # the wheel carries every package the commands import: the main job runs from it
    r = subprocess.run(
        [sys.executable, "-m", "perfmodel", "plan", "gpt3-175b.yaml", "--json"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["config"]["tp"] >= 1
