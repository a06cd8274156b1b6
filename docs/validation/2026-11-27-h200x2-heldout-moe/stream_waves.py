#!/usr/bin/env python3
# The experts' GEMMs of run1's one-GPU steps at the tile model's numbers (hwdb/measured/h200.csv: 132 SMs, 941.8 TFLOP/s
# per tile, 1.0493 us a tile, 3.712 us a GEMM; planner/formulas.c gemm_tile_wave_s): each expert alone at the mean rows
# (the planner), four experts sharing their waves (the validator's 4 streams packed), and rows drawn unevenly (a gamma
# of the coefficient of variation the logs report), each against the measured error of the op. python3 stream_waves.py
import math
SMS=132; TF=941.8e12; TS=1.0493e-6; FX=3.712e-6
def waves(batch,m,n,k):
    tiles=batch*math.ceil(m/128)*math.ceil(n/128); split=1
    if tiles<SMS:
        split=max(1,min(math.floor(SMS/tiles), math.floor(k/256)))
    return math.ceil(tiles*split/SMS), k/split
def t(batch,m,n,k):
    w,kc=waves(batch,m,n,k); return FX + w*(TS+2*128*128*kc*SMS/TF)
def model(E,m,n,k): return E*t(1,m,n,k)           # current: E launches alone
def streams(E,m,n,k,S=4): # S concurrent GEMMs share waves; one fixed per group
    return (E/S)*(t(S,m,n,k)) 
import random
def imbal(E,avg,n,k,cv,which,S=1,trials=200):
    # rows per expert from a gamma with the given cv, sum fixed
    tot=0
    for _ in range(trials):
        sh=1/cv**2; r=[random.gammavariate(sh,1) for _ in range(E)]; s=sum(r); rows=[max(1,round(x/s*avg*E)) for x in r]
        if which=='m': tt=sum(t(1,x,n,k) for x in rows) if S==1 else sum(t(S, x, n, k)/S for x in rows)
        else: tt=sum(t(1,m_,n_,x) for x in rows for (m_,n_) in [(n,k)]) 
        tot+=tt
    return tot/trials
cases=[('mixtral up fwd',8,1024,28672,4096,'m',-10.9),('mixtral up dgrad',8,1024,4096,28672,'m',-10.8),('mixtral up wgrad',8,1024,4096,28672,'k',-12.0),
       ('mixtral down fwd',8,1024,4096,14336,'m',-12.4),('mixtral down dgrad',8,1024,14336,4096,'m',-7.4),('mixtral down wgrad',8,1024,14336,4096,'k',-7.6),
       ('olmoe up fwd',64,512,2048,2048,'m',-8.4),('olmoe up dgrad',64,512,2048,2048,'m',5.7),('olmoe up wgrad',64,512,2048,2048,'k',14.4),
       ('olmoe down fwd',64,512,2048,1024,'m',8.1),('olmoe down dgrad',64,512,1024,2048,'m',22.5),('olmoe down wgrad',64,512,1024,2048,'k',28.4)]
random.seed(1)
for name,E,avg,n,k,which,err in cases:
    if which=='m': base=model(E,avg,n,k); st=streams(E,avg,n,k)
    else: base=E*t(1,n,k,avg); st=(E/4)*t(4,n,k,avg)
    cv=0.72 if E==8 else 0.5
    im=imbal(E,avg,n,k,cv,which)
    print(f"{name:20s} measured vs model {err:+6.1f}%  streams/base {st/base:.3f}  imbalanced/base {im/base:.3f}")
