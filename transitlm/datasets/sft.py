"""The SFT rows of the release: the CSV row (the released columns) of a row
benchmark_builder.build_row made, and its line in sft/*.jsonl.

sft/*.jsonl is TRL's conversational prompt-completion form, one object a line:

    {"prompt": [{"role": "system", "content": system_prompt},
                {"role": "user", "content": sft_prompt}],
     "completion": [{"role": "assistant", "content": sft_label}]}

so ``SFTTrainer`` takes the file as it is (``load_dataset("json", ...)``),
applies the model's chat template and puts the loss on the completion only
(its default for prompt-completion data), as the paper did.

Standard library only; Python 3.8+.
"""

import json

from transitlm.datasets.release_names import SFT_COLUMNS

SYSTEM, PROMPT, LABEL = (SFT_COLUMNS.index(c) for c in ("system_prompt", "sft_prompt", "sft_label"))


def csv_row(cells, task_id):
    """build_row's cells (the benchmark layout, generate_results last) -> the
    release's seven columns, with the split's task_id."""
    return [task_id] + list(cells[1:len(SFT_COLUMNS)])


def jsonl_line(row):
    """A release row (seven columns) -> its sft/*.jsonl line."""
    return json.dumps({"prompt": [{"role": "system", "content": row[SYSTEM]},
                                  {"role": "user", "content": row[PROMPT]}],
                       "completion": [{"role": "assistant", "content": row[LABEL]}]},
                      ensure_ascii=False) + "\n"
