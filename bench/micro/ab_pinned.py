#!/usr/bin/python3
"""Side-by-side A/B of two bandit-microbench binaries on a shared machine.

Both binaries run at the same time, each pinned to its own CPU (taskset), and the CPUs are
swapped every round, so that both meet the same neighbours in the same minutes; every
repetition's CPU time is kept and the medians (and minima) are compared. Needs two CPUs.

  bench/micro/ab_pinned.py BEFORE_BINARY AFTER_BINARY FILTER [ROUNDS]

Example (the previous commit's build in /tmp/old/build):
  bench/micro/ab_pinned.py /tmp/old/build/bin/bandit-microbench build/bin/bandit-microbench \\
      'Features_(Policy|Round_named_(linucb|glb_omd)_diagonal)' 8
"""
import json
import statistics
import subprocess
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binaries = {'before': sys.argv[1], 'after': sys.argv[2]}
    bench_filter = sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    times, loads = {}, []
    for r in range(rounds):
        loads.append(float(open('/proc/loadavg').read().split()[0]))
        cpu = {'before': r % 2, 'after': 1 - r % 2}
        procs = {
            name: subprocess.Popen(
                ['taskset', '-c', str(cpu[name]), path, '--benchmark_filter=' + bench_filter,
                 '--benchmark_repetitions=3', '--benchmark_format=json'],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for name, path in binaries.items()
        }
        for name, proc in procs.items():
            out, _ = proc.communicate()
            if proc.returncode != 0:
                sys.exit('%s exited with %d' % (binaries[name], proc.returncode))
            for bm in json.loads(out)['benchmarks']:
                if bm.get('run_type') == 'iteration':
                    times.setdefault(bm['run_name'], {}).setdefault(name, []).append(
                        bm['cpu_time'])
    print('load average at the start of each round: %.1f to %.1f' % (min(loads), max(loads)))
    print('%-58s %10s %10s %8s  (CPU time, medians of %d runs each; minima after /)'
          % ('benchmark', 'before', 'after', 'ratio', 3 * rounds))
    for name, t in times.items():
        b, a = statistics.median(t['before']), statistics.median(t['after'])
        print('%-58s %10.1f %10.1f %8.2f  / %.1f %.1f %.2f'
              % (name, b, a, a / b, min(t['before']), min(t['after']),
                 min(t['after']) / min(t['before'])))


if __name__ == '__main__':
    main()
