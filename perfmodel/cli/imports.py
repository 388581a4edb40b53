"""`perfmodel import`: plans from other tools' files (Megatron-LM launch files, NeMo recipes)."""

from __future__ import annotations

from typing import Literal

import click

from perfmodel.cli.common import count, json_option, write_text


@click.group("import")
def import_group() -> None:
    """Write a plan from another tool's files: Megatron-LM arguments, NeMo recipes, torchtitan
    job files."""


def import_options(f):
    """What every importer needs besides the file: the GPU (launch files do not name it), and the
    GPU count and vocabulary where the file lacks them."""
    for opt in reversed(
        (
            click.option(
                "--gpu",
                "gpu_name",
                required=True,
                help="GPU preset (launch files do not name the GPU).",
            ),
            click.option(
                "--gpus",
                type=count(),
                help=(
                    "GPU count, where the file does not give it (torchrun's "
                    "--nproc_per_node x --nnodes, or trainer.devices x trainer.num_nodes)."
                ),
            ),
            click.option(
                "--vocab-size",
                type=count(),
                help="Vocabulary, where the file has none (the tokenizer's).",
            ),
            click.option(
                "-o",
                "--output",
                type=click.Path(dir_okay=False),
                help="Write the plan here (default: print it).",
            ),
            json_option,
        )
    ):
        f = opt(f)
    return f


@import_group.command("megatron")
@click.argument("args_file", type=click.Path(dir_okay=False))
@import_options
def import_megatron(args_file, gpu_name, gpus, vocab_size, output, as_json):
    """A plan from a Megatron-LM launch script or argument file (--num-layers,
    --tensor-model-parallel-size, --sequence-parallel, --recompute-granularity,
    --use-distributed-optimizer, --fp8-format, ...).

    Arguments that do not change the cost are named as ignored, arguments perfmodel does not know
    are named as not recognized, and arguments whose cost it cannot model are an error. `check`,
    `estimate` and `compare` also take the file itself, with --gpu.

    \b
    Example:
        perfmodel import megatron train_gpt3_175b_distributed.sh \\
            --gpu a100-80gb -o gpt3.yaml
        perfmodel check train_gpt3_175b_distributed.sh --gpu a100-80gb --gpus 128
    """
    _write(
        args_file, "megatron", "Megatron-LM arguments", gpu_name, gpus, vocab_size, output, as_json
    )


@import_group.command("nemo")
@click.argument("recipe_file", type=click.Path(dir_okay=False))
@import_options
def import_nemo(recipe_file, gpu_name, gpus, vocab_size, output, as_json):
    """A plan from a NeMo recipe YAML: a NeMo 1 Megatron config (trainer and model sections) or a
    Megatron-Bridge config dump (model, train, optimizer, ddp sections).

    A NeMo 2 / Megatron-Bridge recipe is Python: dump its ConfigContainer to YAML first with
    its to_yaml method, e.g. python -c "from megatron.bridge.recipes.llama import
    llama3_8b_pretrain_config as r; r().to_yaml('recipe.yaml')".

    Keys that do not change the cost are named as ignored, keys perfmodel does not know as not
    recognized, and keys whose cost it cannot model are an error. `check`, `estimate` and `compare`
    also take the recipe itself, with --gpu.

    \b
    Example:
        perfmodel import nemo megatron_llama_config.yaml --gpu h100-sxm \\
            --vocab-size 32000 -o llama.yaml
    """
    _write(recipe_file, "nemo", "a NeMo recipe", gpu_name, gpus, vocab_size, output, as_json)


@import_group.command("torchtitan")
@click.argument("job_file", type=click.Path(dir_okay=False))
@import_options
def import_torchtitan(job_file, gpu_name, gpus, vocab_size, output, as_json):
    """A plan from a torchtitan TOML job config ([model] name and flavor, [parallelism]
    data_parallel_shard_degree, tensor_parallel_degree, ..., [training] local_batch_size,
    seq_len, [activation_checkpoint], [compile], [quantize] / [float8]).

    The model comes from [model] name and flavor (llama3 8B is the llama3-8b preset); the GPU
    count from --gpus where data_parallel_shard_degree is -1. Keys that do not change the cost
    are named as ignored, keys perfmodel does not know as not recognized, and keys whose cost it
    cannot model are an error. `check` and `estimate` also take the .toml file, with --gpu.

    \b
    Example:
        perfmodel import torchtitan llama3_8b.toml --gpu h100 --gpus 64 \\
            -o llama.yaml
    """
    if vocab_size is not None:
        raise click.UsageError("--vocab-size: the torchtitan model preset gives the vocabulary")
    _write(job_file, "torchtitan", "a torchtitan job file", gpu_name, gpus, None, output, as_json)


def _write(
    path: str,
    kind: Literal["megatron", "nemo", "torchtitan"],
    source: str,
    gpu: str,
    gpus: int | None,
    vocab_size: int | None,
    output: str | None,
    as_json: bool = False,
) -> None:
    """Read, check that the plan loads and runs, say what was ignored or assumed, write the plan
    (with --json: the plan mapping and those lists, as JSON)."""
    from perfmodel.inputs.load import notes, plan_of, read_launch
    from perfmodel.inputs.megatron_emit import plan_yaml
    from perfmodel.output import console

    imp = read_launch(path, kind, gpu, gpus, vocab_size)
    plan_of(imp, path)
    if as_json:
        console.emit_json(
            {
                "plan": imp.plan,
                "ignored": imp.ignored,
                "unrecognized": imp.unrecognized,
                "assumed": imp.assumed,
                "source": source,
            }
        )
        return
    for note in notes(imp):
        for part in console.wrap_keeping_units(note, 80, hang=2):
            click.echo(part, err=True)
    text = plan_yaml(imp, source)
    if output:
        write_text(output, text, "-o", source=path)
    else:
        click.echo(text, nl=False)
