# The power model at three granularities, offline on a run directory: the whole step (as the planner),
# per pass (forward, backward, optimizer), or per op, each settling its own clock.  From the repository
# root: python3 granularity.py RUNDIR phase|op|all [EXPONENT]
import json,subprocess,csv,sys,math
D=sys.argv[1]; ov=D+"/h100-sxm.csv"; mode=sys.argv[2] if len(sys.argv)>2 else "phase"
gam=float(sys.argv[3]) if len(sys.argv)>3 else None
nop="/tmp/sextant-nopower.csv"
open(nop,"w").writelines(l for l in open(ov) if ",power_static_w," not in l and ",clock_max_mhz," not in l)
g={}
for l in open(ov):
    p=l.split(",")
    if len(p)>2: g[p[1]]=p[2]
P0=float(g["power_static_w"]); cap=float(g["power_cap_w"]); G=gam if gam else float(g["clock_energy_exponent"])
def solve(E,O,CB):
    if CB<=0 or E<=0: return 1.0
    P=lambda x: P0+E*x**G/(O+CB/x)
    if P(1)<=cap: return 1.0
    lo,hi=0.3,1.0
    for _ in range(60):
        m=(lo+hi)/2
        if P(m)>cap: hi=m
        else: lo=m
    return (lo+hi)/2
specs=[("gpt2",8,1024),("gpt2",16,1024),("gpt2",32,1024),("gpt2-medium",4,1024),("gpt2-medium",8,1024),("gpt2-medium",16,1024),("llama3.2-1b",1,2048),("llama3.2-1b",2,2048),("llama3.2-1b",4,2048)]
def est(m,b,s,att,rec,o):
    out=subprocess.run(["build/sextant","estimate",m,"--gpu","h100-sxm","--mbs",str(b),"--gbs",str(b),"--seq",str(s),"--attention",att,"--recompute",rec,"--calibration",o,"--no-dropout","--format","json","--ops"],capture_output=True,text=True).stdout
    return json.loads(out)
errs=[]
for att,P in (("unfused","train"),("flash","flash")):
  for m,b,s in specs:
    r=[r for r in csv.DictReader(open(f"{D}/{P}_{m}_mbs{b}.csv")) if r["op"]=="step" and r["calibrated"]=="1"][0]
    meas=float(r["measured_s"]); vp=float(r["predicted_s"])
    pw=est(m,b,s,att,r["recompute"],ov); top=est(m,b,s,att,r["recompute"],nop)
    ops_p=pw["stages"][0]["ops"]; ops_t=top["stages"][0]["ops"]
    phases={}
    for a,t in zip(ops_p,ops_t):
        if a.get("kind")=="comm": continue
        key = a["pass"] if mode=="phase" else (a["name"]+a["pass"] if mode=="op" else "all")
        if mode=="phase" and key=="recompute": key="bwd"
        c=a["count"]; cb=a.get("clock_bound_s",0.0); E=a.get("energy_j",0.0)
        ph=phases.setdefault(key,[0,0,0])
        ph[0]+= (t["time_s"]-cb)*c; ph[1]+=cb*c; ph[2]+=E*c
    T=0; xs=[]
    for k,(O,CB,E) in phases.items():
        x=solve(E,O,CB); T+=O+CB/x
        if mode=="phase": xs.append(f"{k}:{x:.3f}")
    e=(T/meas-1)*100; errs.append(e)
    print(f"{att:7s} {m:12s} {b:2d} meas {meas*1e3:8.2f} step-model {vp*1e3:8.2f} ({(vp/meas-1)*100:+5.1f}%) {mode} {T*1e3:8.2f} ({e:+5.1f}%) {' '.join(xs)}")
print(f"{mode} range {min(errs):+.1f} .. {max(errs):+.1f}, mean |e| {sum(abs(x) for x in errs)/len(errs):.2f}")
