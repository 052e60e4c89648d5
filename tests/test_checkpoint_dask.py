"""Checkpoint shards on a Dask cluster (``scheduler=`` / ``--scheduler ADDR``) through the one
executor of fmtsim.executor: the same bytes as one process, for dequantize and convert, from
the API and the CLI; bad combinations named."""

import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")

from gen_checkpoints import make  # noqa: E402

from fmtsim.checkpoint import CheckpointError, convert  # noqa: E402
from fmtsim.checkpoint.dequant import dequantize  # noqa: E402
from fmtsim.cli import main  # noqa: E402


def same_shards(a, b):
    names = sorted(p.name for p in a.glob("*.safetensors"))
    assert names and names == sorted(p.name for p in b.glob("*.safetensors"))
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n


@pytest.mark.slow  # a LocalCluster starts in about a second
def test_local_cluster_gives_the_bytes_of_one_process(tmp_path, capsys):
    distributed = pytest.importorskip("dask.distributed", reason="the Dask path needs fmtsim[dask]")
    src = make("deepseek-fp8-block", tmp_path)
    dequantize(src, tmp_path / "dq-one", jobs=1)
    convert(src, tmp_path / "fnuz-one", jobs=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            s = dequantize(src, tmp_path / "dq-client", scheduler=client)
            assert len(s.shards) == 2 and client.status == "running"  # a Client given in is left open
            c = convert(src, tmp_path / "fnuz-client", scheduler=client)
            assert all(r.verified for r in c.shards)
        addr = cluster.scheduler_address
        assert main(["checkpoint", "dequantize", str(src), str(tmp_path / "dq-cli"), "--scheduler", addr]) == 0
        assert main(["checkpoint", "convert", str(src), str(tmp_path / "fnuz-cli"), "--scheduler", addr]) == 0
    capsys.readouterr()
    for name in ("client", "cli"):
        same_shards(tmp_path / "dq-one", tmp_path / f"dq-{name}")
        same_shards(tmp_path / "fnuz-one", tmp_path / f"fnuz-{name}")


def test_scheduler_arguments_are_checked(tmp_path, capsys):
    src = make("deepseek-fp8-block", tmp_path)
    with pytest.raises(CheckpointError, match="give --jobs or --scheduler, not both"):
        dequantize(src, tmp_path / "x", jobs=2, scheduler="tcp://127.0.0.1:1")
    assert main(["checkpoint", "convert", str(src), str(tmp_path / "y"), "--jobs", "2",
                 "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "give --jobs or --scheduler, not both" in capsys.readouterr().err
    assert main(["checkpoint", "convert", str(src), str(tmp_path / "z"), "--to", "mxfp8",
                 "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "--scheduler: only for --to fnuz" in capsys.readouterr().err
    pytest.importorskip("dask.distributed", reason="the scheduler type check needs fmtsim[dask]")
    with pytest.raises(CheckpointError, match="scheduler must be a dask.distributed.Client or an address"):
        convert(src, tmp_path / "w", scheduler=3)
