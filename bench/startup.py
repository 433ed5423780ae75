"""Start-up: the wall time of a one-round `fedrepro run` on the embedded MNIST, and of importing what it imports.

Each is a fresh process, `--repeats` times; the medians are printed, with the import of torch alone for scale. What is
left once imports are lazy is torch's own import and the round's training and two evaluations (round 0 and round 1).

    python bench/startup.py [--repeats 5]
"""
import argparse, statistics, subprocess, sys, tempfile, time


def seconds(code: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, '-c', code.replace('OUT', out)], check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=int, default=5)
    args = ap.parse_args()
    run = ("from fedrepro.cli import main; main(['run', '--dataset', 'mnist5k', '--num-clients', '10', '--rounds', '1', "
           "'--out', 'OUT', '--no-progress'])")
    for what, code in (('python', 'pass'), ('import torch', 'import torch'), ('import fedrepro.cli', 'import fedrepro.cli'),
                       ('import every fedrepro module', 'from fedrepro.core import load_modules; load_modules()'),
                       ('fedrepro run --dataset mnist5k --num-clients 10 --rounds 1', run)):
        print(f'{seconds(code, args.repeats):6.2f} s  {what}')


if __name__ == '__main__':
    main()
