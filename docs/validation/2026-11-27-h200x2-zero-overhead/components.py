#!/usr/bin/env python3
"""components.py: from the validate logs of the ZeRO-1/2/3 runs that have one, what the data-parallel work did:
the waits the step measured inside its micro-batches (the *_exposed rows of the forward and backward) and in all
(dp_exposed, the planner's price beside it), each collective's measured time on its stream over the planner's time
for it alone, split into the dense layers' (dp_) and the experts' (edp_), and NVML's clock against the model's."""
import glob, re

LOGS = ['docs/validation/2026-11-27-h200x2-heldout-new/olmo', 'docs/validation/2026-11-27-h200x2-heldout-new/yi',
        'docs/validation/2026-11-26-h200x2-heldout-qwen/after', 'tests/data/2026-11-27-h200x2-heldout-moe/run1/olmoe-4l',
        'docs/validation/2026-11-27-h200-moe-experts/after']
print('%-28s %6s %9s %9s %9s %10s %10s %6s %6s' % ('run', 'ZeRO', 'waits/mb', 'exposed', 'priced', 'dp coll.',
                                                  'edp coll.', 'NVML', 'model'))
for d in LOGS:
    for z in ('1', '2', '3'):
        text = open('%s/dp2z%s.log' % (d, z)).read()
        waits = sum(float(m) for m in re.findall(r'^\S+_exposed\s+(?:fwd|bwd)\s+([\d.]+)', text, re.M))
        exp = re.search(r'^dp_exposed\s+step\s+([\d.]+)\s+([\d.]+)', text, re.M)
        ratio = {}
        for group in ('dp', 'edp'):
            rows = re.findall(r'^%s_(?:allgather_params_fwd|allgather_params_bwd|reduce_scatter_grads)\s+(?:fwd|bwd)\s+([\d.]+)\s+([\d.]+)' % group, text, re.M)
            p = sum(float(a) for a, b in rows); m = sum(float(b) for a, b in rows)
            ratio[group] = '%.2f' % (m / p) if p > 0 else '-'
        nvml = re.search(r'^power: .* and (\d+) MHz', text, re.M)
        model = re.search(r'^power model: predicted \d+ W at (\d+) MHz', text, re.M)
        name = d.split('/')[-1] if d.split('/')[-1] != 'after' else d.split('/')[-2].split('-')[-1] + '/after'
        print('%-28s %6s %9.2f %9.2f %9.2f %10s %10s %6s %6s' % (name, z, waits, float(exp.group(2)), float(exp.group(1)),
              ratio['dp'], ratio['edp'], nvml.group(1), model.group(1)))
