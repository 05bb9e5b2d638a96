"""Hang verdicts on hybrid meshes: real dp x tp jobs (dp=4,tp=2 and dp=3,tp=2,
SCOUT_MESH set; per step a tp all-reduce, a dp all-reduce of the gradients
and a world all-reduce), faults in the tp group (stop / exit before it, skip
it, call it twice) and in the dp group, at a random rank and step. The rank
whose own history departs from its replicas' is named, never its tp partner
that waits for it. Seed printed; SCOUT_CAMPAIGN_SEED reproduces.
"""
import json
import os
import random
import sys
import unittest

import hang_campaign
from scoutlib import ScoutTestCase


class HybridMesh(ScoutTestCase):
    def test_randomized_dp_tp_faults(self):
        s = os.environ.get("SCOUT_CAMPAIGN_SEED")
        seed = int(s) if s else random.SystemRandom().randrange(1 << 31)
        print(f"hybrid campaign seed {seed}", file=sys.stderr)
        rng = random.Random(seed)
        results = []
        for mesh in ("dp=4,tp=2", "dp=3,tp=2"):
            world = 8 if mesh == "dp=4,tp=2" else 6
            kind = rng.choice(("stop", "exit", "skip", "extra"))
            where = rng.choice(("tp", "dp")) if kind != "extra" else "tp"
            desc = {"world": world, "mesh": mesh, "steps": 8, "kind": kind,
                    "faults": [(rng.randrange(world), rng.randint(2, 6), kind, where)]}
            results.append(hang_campaign.run_one(rng, desc, log=lambda m: print(m, file=sys.stderr)))
        for r in results:
            msg = f"campaign seed {seed}: {json.dumps({k: v for k, v in r.items() if k != 'logs'})}"
            self.assertFalse(r["innocent"], msg + "\n" + json.dumps(r.get("logs", {}))[:6000])
            self.assertFalse(r["missed"], msg + "\n" + json.dumps(r.get("logs", {}))[:6000])


if __name__ == "__main__":
    unittest.main()
