"""Record real PyTorch profiler traces of a small training run with the CPU build of torch.

Used by tests/test_torch_traces.py (when torch is installed) and to regenerate the committed fixture:

    python tests/torch_traces.py tests/fixtures/torch-cpu

The run: a two-layer MLP trained with SGD on random data served by a DataLoader whose dataset sleeps in
``__getitem__`` (a slow input pipeline), profiled with a wait/warmup/active schedule, ``prof.step()`` per
step, ``profile_memory`` and ``record_shapes``; the trace is written by ``tensorboard_trace_handler``
(``{worker}.{timestamp}.pt.trace.json``), as users produce it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def record_training_trace(out_dir: Path, *, active_steps: int = 3, sleep_s: float = 0.004, num_workers: int = 0,
                          use_gzip: bool = False) -> Path:
    """Train for a few steps under the profiler and return the trace file it wrote."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    from torch.utils.data import DataLoader, Dataset

    class SlowDataset(Dataset):
        def __len__(self) -> int:
            return 4096

        def __getitem__(self, index: int):
            time.sleep(sleep_s)  # decoding / augmentation that the training loop waits for
            generator = torch.Generator().manual_seed(index)
            return torch.randn(64, generator=generator), torch.tensor(index % 10)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowDataset(), batch_size=8, num_workers=num_workers)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = 2 + active_steps
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=active_steps),
                 on_trace_ready=tensorboard_trace_handler(str(out_dir), worker_name="worker0", use_gzip=use_gzip),
                 record_shapes=True, profile_memory=True) as prof:
        for step, (inputs, labels) in enumerate(loader):
            if step >= steps:
                break
            loss = torch.nn.functional.cross_entropy(model(inputs), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            prof.step()
    (trace,) = sorted(out_dir.glob("*.pt.trace.json*"))
    return trace


if __name__ == "__main__":
    print(record_training_trace(Path(sys.argv[1])))
