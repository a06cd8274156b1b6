# Per run: the speed the step ran at (x_meas, from the measured step and the planner's split into
# seconds that follow the clock and seconds that do not), the model's clock, the step's switching energy
# at the top clock by the model, the measured one (NVML power less static, times the step), and the
# exponent that would reconcile them.  Run from the repository root: python3 energy.py RUNDIR
import json,subprocess,csv,math,sys
D=sys.argv[1]; ov=D+"/h100-sxm.csv"
noP=open("/tmp/sextant-nopower.csv","w")
for l in open(ov):
    if any(k in l for k in ("power_static_w","clock_max_mhz")): continue
    noP.write(l)
noP.close()
P0=float([l.split(",")[2] for l in open(ov) if ",power_static_w," in l][0])
specs=[("gpt2",8,1024),("gpt2",16,1024),("gpt2",32,1024),("gpt2-medium",4,1024),("gpt2-medium",8,1024),("gpt2-medium",16,1024),("llama3.2-1b",1,2048),("llama3.2-1b",2,2048),("llama3.2-1b",4,2048)]
def est(m,b,s,att,rec,o):
    out=subprocess.run(["build/sextant","estimate",m,"--gpu","h100-sxm","--mbs",str(b),"--gbs",str(b),"--seq",str(s),"--attention",att,"--recompute",rec,"--calibration",o,"--no-dropout","--format","json"],capture_output=True,text=True).stdout
    return json.loads(out)
for att,P in (("unfused","train"),("flash","flash")):
  for m,b,s in specs:
    r=[r for r in csv.DictReader(open(f"{D}/{P}_{m}_mbs{b}.csv")) if r["op"]=="step" and r["calibrated"]=="1"][0]
    meas=float(r["measured_s"])
    j=json.load(open(f"{D}/{P}_{m}_mbs{b}.json")); W=j["power"]["measured_w"]; C=j["power"].get("measured_celsius",0)
    e=est(m,b,s,att,r["recompute"],ov)["time"]; t=est(m,b,s,att,r["recompute"],"/tmp/sextant-nopower.csv")["time"]
    Ttop=t["step_s"]; CB=e["clock_bound_top_s"]; E=(e["top_clock_power_w"]-P0)*Ttop
    O=Ttop-CB
    x=CB/(meas-O) if meas>O else float('nan')
    dyn=(W-P0)*meas
    g=math.log(dyn/E)/math.log(x) if 0<x<1 else float('nan')
    print(f"{att:7s} {m:12s} {b:2d} x_meas {x:.3f} x_model {e['clock_fraction']:.3f} E_top {E:6.2f} J dyn_meas {dyn:6.2f} J ratio {dyn/E:.3f} implied gamma {g:5.2f}")
