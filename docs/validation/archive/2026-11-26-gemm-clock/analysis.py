#!/usr/bin/env python3
# Offline, from the repository root: python3 docs/validation/archive/2026-11-26-gemm-clock/analysis.py
# Every recorded one-GPU validate step of the H200 and the H100 (the 2026-11-25 and -26 reports and tests/data), its
# forward GEMMs on rank 0: measured time against the time the planner gives them at the top clock (its prediction
# times the predicted clock fraction), regressed in logs on the clock NVML measured over the step.
import csv,glob,re,os,math,sys
def runs(gpu):
    out=[];seen=set()
    for f in sorted(set(glob.glob('docs/validation/2026-11-2[56]*/**/*.csv',recursive=True)+glob.glob('tests/data/2026-11-2[56]*/**/*.csv',recursive=True))):
        if 'archive' in f or '/before' in f or '/old' in f.split('/')[-1]: continue
        log=f[:-4]+'.log'
        if not os.path.exists(log): continue
        txt=open(log).read()
        m1=re.search(r'power: (\d+) W and (\d+) MHz',txt); m2=re.search(r'power model: predicted (\d+) W at (\d+) MHz',txt)
        if not m1 or not m2: continue
        try: rows=[r for r in csv.DictReader(open(f)) if r.get('calibrated')=='1' and r.get('rank','0') in ('0','')]
        except Exception: continue
        if not rows or rows[0]['gpu']!=gpu: continue
        r0=rows[0]
        if int(r0.get('pp') or 1)>1 or int(r0.get('cp') or 1)>1 or int(r0.get('dp') or 1)>1 or int(r0.get('tp') or 1)>1: continue
        p=m=0
        for r in rows:
            if any(r['op'].startswith(k) for k in ('qkv','attn_out','mlp_up','mlp_down','lm_head')) and r['pass']=='fwd':
                p+=float(r['predicted_s']); m+=float(r['measured_s'])
        if p<=0: continue
        key=(r0['model'],r0['mbs'],r0['seq'],round(m,6))
        if key in seen: continue
        seen.add(key)
        out.append((int(m1.group(2)),int(m2.group(2)),p,m,r0['model'],f))
    return out
for gpu in ('h200','h100-sxm'):
    R=runs(gpu)
    xs=[math.log(1980.0/mm) for mm,pm,p,m,mo,f in R]; ys=[math.log(m/(p*pm/1980.0)) for mm,pm,p,m,mo,f in R]
    n=len(xs); mx=sum(xs)/n; my=sum(ys)/n
    sxx=sum((x-mx)**2 for x in xs); sxy=sum((x-mx)*(y-my) for x,y in zip(xs,ys))
    b=sxy/sxx; a=my-b*mx
    res=[y-(a+b*x) for x,y in zip(xs,ys)]; sd=math.sqrt(sum(r*r for r in res)/(n-2))
    print("%s: %d one-GPU steps (forward GEMMs, rank 0): ln(measured / calibrate's top-clock time) = %.3f + %.3f ln(1980/MHz), residual sd %.3f; k = %.3f; model's own slope 1, intercept 0"%(gpu,n,a,b,sd,math.exp(a)))
