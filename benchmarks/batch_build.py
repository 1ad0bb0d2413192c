"""CPU time of building training batches: tokenising every document and question of an FTU
micro-batch and indexing them (:func:`unifar.objective.build_ftu_batch`), per optimizer step.

Training with a trainable base does this at every step on the CPU, whatever the accelerator, so
it bounds the step time from below. Chapter 4, section 4.8 compares it with the H200's step.

    python benchmarks/batch_build.py --ftus artifacts/ftus/full --steps 20 --json results/ch04/batch_build_cpu.json

Prints one line and writes JSON (seconds per step of ``batch_size x grad_accumulation`` FTUs,
median and mean, documents and questions per step, machine, git commit).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/full")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps timed (default 20)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from unifar import UniFAR, UniFARConfig
    from unifar.datasets.ftu_files import load_ftus
    from unifar.objective import build_ftu_batch
    from unifar.runtime import run_facts

    data = load_ftus(args.ftus)
    model = UniFAR(UniFARConfig(base_model=args.model), device="cpu")
    bs, acc = model.config.batch_size, model.config.grad_accumulation
    order = np.random.default_rng(0).permutation(len(data.ftus))
    seconds, n_docs, n_questions = [], [], []
    for step in range(args.steps):
        idx = order[step * bs * acc : (step + 1) * bs * acc]
        t0 = time.perf_counter()
        docs = questions = 0
        for k in range(0, len(idx), bs):  # one micro-batch at a time, as the training loop does
            fb = build_ftu_batch(model, [data.ftus[i] for i in idx[k : k + bs]], data.documents)
            docs += len(fb.doc_ids)
            questions += len(fb.question_texts)
        seconds.append(time.perf_counter() - t0)
        n_docs.append(docs)
        n_questions.append(questions)
    report = {
        "what": "CPU seconds to build the batches of one optimizer step (tokenise + index), unifar.objective.build_ftu_batch",
        "ftus": args.ftus, "model": args.model, "ftus_per_step": bs * acc, "steps": args.steps,
        "seconds_per_step_median": round(statistics.median(seconds), 4),
        "seconds_per_step_mean": round(statistics.fmean(seconds), 4),
        "documents_per_step_mean": round(statistics.fmean(n_docs), 1),
        "questions_per_step_mean": round(statistics.fmean(n_questions), 1),
        "run": run_facts(),
    }
    print(f"batch building: median {report['seconds_per_step_median']} s per step of {bs * acc} FTUs "
          f"({report['documents_per_step_mean']} documents, {report['questions_per_step_mean']} questions)")
    if args.json:
        from unifar.files import write_json

        print(f"wrote {write_json(args.json, report)}")
    return report


if __name__ == "__main__":
    main()
