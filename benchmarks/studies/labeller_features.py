"""Which features of UniFAR's in-context sentence states should the shipped labeller's head read?

A one-off dev comparison behind :func:`unifar.rhetoric.context_labeller.document_features`:
a linear head (C in 0.3, 1, 3) on CSAbstruct train, scored by macro-F1 on CSAbstruct dev (the
choice) and, for a look at another domain, on 400 PubMedQA abstracts, over the states ``S``
(L2-normalised), the states centred on their abstract's mean ``C``, both ``SC``, and both plus
the relative position ``SP`` (the shipped choice). Prints a table (about 4 min on 2 CPU cores)::

    .venv/bin/python benchmarks/studies/labeller_features.py
"""
import torch
import torch.nn.functional as F
from pathlib import Path
from unifar.rhetoric.context_labeller import InContextLabeller
from unifar.rhetoric.labeller import fit_linear_head
from unifar.rhetoric.labeller_data import csabstruct_training_documents
from unifar.datasets.leakage import forbidden_from_repo_data
from unifar.datasets.labelled_abstracts import load_csabstruct
from unifar.datasets.pubmedqa import load_pubmedqa
from unifar.rhetoric.labeller_scores import facet_scores
from unifar.facets import FACETS
root=Path("data")
forb=forbidden_from_repo_data(root, include=("csfcube",))
train,_=csabstruct_training_documents(("train",), path=root/"csabstruct", forbidden=forb)
dev=list(load_csabstruct(root/"csabstruct", split="dev"))
pm=list(load_pubmedqa(root/"pubmedqa_pqal").documents)[:400]
lab=InContextLabeller.for_base("minilm",512)
def feats(docs):
    enc=lab.encode(docs)
    out={"S":[], "C":[], "SC":[], "SP":[]}; y=[]
    for k,d in enumerate(docs):
        offset=1 if " ".join((d.get("title") or "").split()) else 0
        st=enc.sentence_states[k]; ui=enc.unit_index[k]
        rows=[u for u,i in enumerate(ui) if i>=offset]
        given=[i for i,s in enumerate(d["sentences"]) if " ".join(s.split())]
        S=st[rows]; n=len(rows)
        if n==0: continue
        C=S-S.mean(0,keepdim=True)
        pos=torch.tensor([[r/(max(n-1,1))] for r in range(n)])
        for r,u in enumerate(rows):
            lbl=d["labels"][given[ui[u]-offset]]
            if lbl is None: continue
            y.append(FACETS.index(lbl))
            s=F.normalize(S[r],dim=-1); c=F.normalize(C[r],dim=-1)
            out["S"].append(s); out["C"].append(c); out["SC"].append(torch.cat([s,c])); out["SP"].append(torch.cat([s,c,pos[r]]))
    return {k:torch.stack(v) for k,v in out.items()}, torch.tensor(y)
Xt,yt=feats(train); Xd,yd=feats(dev); Xp,yp=feats(pm)
for name in ("S","C","SC","SP"):
    for C in (0.3,1,3):
        p,_=fit_linear_head(Xt[name],yt,C)
        def f1(X,y): 
            pred=(X[name].double()@p["W"].T+p["b"]).argmax(-1)
            return facet_scores([FACETS[i] for i in y.tolist()],[FACETS[i] for i in pred.tolist()])["macro_f1"]
        print(name, C, round(f1(Xd,yd),3), round(f1(Xp,yp),3), flush=True)
