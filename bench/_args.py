"""What the bench scripts share. Their command lines: counts with a least value and a device this machine has, each
refused by argparse in one line (`<script>: error: argument --rounds: ...`, exit 2) before anything is measured. Their
results: a CSV stamped with the day and the thread count (`write_results`)."""

import argparse
import datetime
from pathlib import Path
import pandas as pd
import torch
from fedrepro.core import get_device


def at_least(least: int, why: str = ''):
    "An argparse type: an integer >= `least` (`why`: the reason for it, shown with a refusal)."

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < least:
            raise argparse.ArgumentTypeError(f'{text!r} is not allowed: an integer >= {least}{why}')
        return value

    return parse


def known_device(text: str) -> str:
    "An argparse type: a device this machine has ('auto', 'cpu', 'cuda', 'cuda:N'), as `get_device` takes it."
    try:
        get_device(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def existing_folder(text: str) -> Path:
    "An argparse type: a folder that exists (a runs folder to read)."
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f'{text!r} is not allowed: a folder that exists')
    return Path(text)


def write_results(table: pd.DataFrame, out):
    "`table` to CSV `out` (its folder made), with the day it was measured and this process's torch threads."
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    table.assign(measured=str(datetime.date.today()), threads=torch.get_num_threads()).to_csv(out, index=False)
    print(f'written: {out}')
