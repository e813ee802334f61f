"""Writes TensorBoard event files with tensorboardX (the optional extra `tensorboard`), the way training
scripts do: `add_scalar` (simple_value, as tensorboardX and torch.utils.tensorboard write it) and TF2's
scalar-as-tensor (`tf.summary.scalar` writes a rank-0 tensor, no simple_value). Used by the tests and to
make the committed sample: `python tests/tb_events.py OUT_DIR`."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter
from tensorboardX.proto.event_pb2 import Event
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboardX.proto.tensor_pb2 import TensorProto

T0 = 1767607200.0   # 2026-01-05 10:00:00 UTC


def write_scalars(folder: Path, scalars: dict[str, list[float]], t0: float = T0, tensor_tags: tuple = ()) -> Path:
    """One event file in `folder`: each tag's values at steps 0.., 10 s apart; the tags in `tensor_tags`
    written as TF2 writes them (half as float_val, half as tensor_content)."""
    folder.mkdir(parents=True, exist_ok=True)
    w = SummaryWriter(str(folder))
    n = max(len(v) for v in scalars.values())
    for step in range(n):
        for tag, values in scalars.items():
            if step >= len(values):
                continue
            if tag in tensor_tags:
                if step % 2:
                    tensor = TensorProto(dtype=1, tensor_content=np.float32(values[step]).tobytes())
                else:
                    tensor = TensorProto(dtype=1, float_val=[values[step]])
                meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
                summary = Summary(value=[Summary.Value(tag=tag, tensor=tensor, metadata=meta)])
                w.file_writer.add_event(Event(summary=summary), step=step, walltime=t0 + 10 * step)
            else:
                w.add_scalar(tag, values[step], global_step=step, walltime=t0 + 10 * step)
    w.close()
    (path,) = folder.glob("events.out.tfevents.*")
    return path


def sample_scalars() -> dict[str, list[float]]:
    """A job whose allocated memory grows 8 MiB a step, with the tags a reader must leave aside."""
    steps = range(30)
    return {
        "memory/allocated_mib": [2048.0 + 8 * s for s in steps],
        "gpu/mem_reserved_gb": [3.0 + (0.5 if s >= 10 else 0.0) for s in steps],
        "memory/peak_allocated_mib": [2100.0 + 8 * s for s in steps],
        "gpu/mem_util_percent": [40.0 for _ in steps],
        "memory/allocated": [1.0 for _ in steps],
        "train/loss": [1.0 / (s + 1) for s in steps],
    }


if __name__ == "__main__":
    print(write_scalars(Path(sys.argv[1]), sample_scalars(), tensor_tags=("gpu/mem_reserved_gb",)))
