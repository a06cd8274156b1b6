#!/usr/bin/env python3
"""The GEMM tile model's split-K regime (docs/model.md, "GEMM time over M, N, K": a GEMM with fewer tiles than SMs
splits K over the idle ones) against the 198 gemm_us rows of hwdb/measured/h100-sxm.csv, with the fitted tile
terms of that file: the 18 rows in that regime (the weight gradients of GPT-2's and GPT-2 medium's 768- and 1024-wide
layers, K = tokens) and two forms of a split-K efficiency, each fitted on the rows of one model and judged on the
other's (leave one model out).  From the repository root:
    python3 docs/validation/2026-11-26-moe-launches/splitk.py > docs/validation/2026-11-26-moe-launches/splitk.txt
"""
import csv, math
OVERLAY = 'hwdb/measured/h100-sxm.csv'
terms = {r[1]: float(r[2]) for r in csv.reader(open(OVERLAY)) if len(r) > 2 and r[1] in
         ('gemm_tile_tflops', 'gemm_tile_us', 'gemm_fixed_us', 'sm_count')}
R = terms['gemm_tile_tflops'] * 1e12; ts = terms['gemm_tile_us'] * 1e-6; fx = terms['gemm_fixed_us'] * 1e-6
S = terms['sm_count']
rows=[]
for r in csv.reader(open(OVERLAY)):
    if len(r)>2 and r[1].startswith('gemm_us:'):
        m,n,k=map(int,r[1].split(':')[1].split('x'))
        model='gpt2-medium' if 'gpt2-medium' in r[3] else 'gpt2' if 'gpt2 ' in r[3] else 'llama'
        rows.append((m,n,k,float(r[2])*1e-6,model))
def T(m,n,k,form,e):
    tiles=math.ceil(m/128)*math.ceil(n/128); split=1
    if tiles<S: split=max(1,min(math.floor(S/tiles), math.floor(k/256)))
    w=math.ceil(tiles*split/S)
    if form=='eff_split':   # the split's gain only e of the way
        s_eff=1+(split-1)*e; kc=k/s_eff
        return fx+w*(ts+2*128*128*kc*S/R)
    if form=='rate':        # split CTAs' K loop at e of the rate
        kc=k/split; r=R*(e if split>1 else 1)
        return fx+w*(ts+2*128*128*kc*S/r)
def err(rs,form,e): return [T(m,n,k,form,e)/meas-1 for m,n,k,meas,_ in rs]
def in_split(x):
    t = math.ceil(x[0]/128)*math.ceil(x[1]/128)
    return t < S and min(int(S//t), x[2]//256) > 1
for name, rs in (('split-K rows', [x for x in rows if in_split(x)]), ('other rows', [x for x in rows if not in_split(x)])):
    es = err(rs, 'eff_split', 1.0)
    print('%s %d, the model as fitted: mean|e| %.1f%% signed %+.1f%%' % (name, len(rs), 100*sum(map(abs, es))/len(es), 100*sum(es)/len(es)))
split_rows=[x for x in rows if (lambda t: t<S and min(int(S//t), x[2]//256)>1)(math.ceil(x[0]/128)*math.ceil(x[1]/128))]
for form in ('eff_split','rate'):
    grid=[i/100 for i in range(1,101)]
    best=min(grid,key=lambda e: sum(v*v for v in err(split_rows,form,e)))
    es=err(split_rows,form,best)
    print(form,'in-sample e=%.2f'%best,'mean|e| %.1f%% signed %+.1f%%'%(100*sum(map(abs,es))/len(es),100*sum(es)/len(es)))
    # leave one model out
    out=[]
    for held in ('gpt2','gpt2-medium'):
        fitrows=[x for x in split_rows if x[4]!=held]; test=[x for x in split_rows if x[4]==held]
        b=min(grid,key=lambda e: sum(v*v for v in err(fitrows,form,e)))
        te=err(test,form,b); out+=te
        print('   LOMO hold %s: e=%.2f  held-out mean|e| %.1f%% signed %+.1f%%'%(held,b,100*sum(map(abs,te))/len(te),100*sum(te)/len(te)))
    print('   LOMO overall mean|e| %.1f%%'%(100*sum(map(abs,out))/len(out)))
    print('   up_dgrad 1024x1024x5632: %.1f us (fixed-rows bench 20.65); down_dgrad 2816x1024x1024 %.1f (11.07)'%(T(1024,1024,5632,form,best)*1e6, T(2816,1024,1024,form,best)*1e6))
print('current (e=1):', '%.1f%%'%(100*sum(map(abs,err(split_rows,'eff_split',1.0)))/len(split_rows)))
