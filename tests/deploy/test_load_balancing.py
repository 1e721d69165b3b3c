"""The gRPC load-balancing trap, and the client configuration the docs give for it.

One channel to several replicas keeps one connection with ``pick_first`` (gRPC's default), so
every call goes to one replica; with the service config ``{"loadBalancingConfig":
[{"round_robin":{}}]}`` the calls go to all of them. In Kubernetes the addresses come from the
headless service's DNS name; here the ``ipv4:`` resolver lists two real ``gnau serve`` processes,
which tell themselves apart by their log keys (each has its own data directory and key).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gnau_client import GnauClient, RetryPolicy

from tests.node.test_node_client import NODE_CLIENT, node_executable
from tests.serving import Served, served

# make test-system: `gnau serve` processes behind a balancer.
pytestmark = pytest.mark.system

CALLS = 12


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Served]]:
    root = tmp_path_factory.mktemp("replicas")
    with served(root / "one") as one, served(root / "two") as two:
        yield one, two


def both(replicas: tuple[Served, Served]) -> str:
    return "ipv4:" + ",".join(replica.target for replica in replicas)


def keys_seen_by_python(target: str, options: list[tuple[str, str]]) -> set[str]:
    with GnauClient(target, options=options) as client:
        return {client.get_public_keys().verifier_keys[-1] for _ in range(CALLS)}


def test_python_round_robin_reaches_every_replica(replicas: tuple[Served, Served]) -> None:
    # As clients/python/README.md gives it: one service config, the retry policy kept.
    service_config = {
        **RetryPolicy().service_config(),
        "loadBalancingConfig": [{"round_robin": {}}],
    }
    options = [("grpc.service_config", json.dumps(service_config))]
    assert keys_seen_by_python(both(replicas), options) == {r.vkey for r in replicas}


def test_python_default_pins_one_replica(replicas: tuple[Served, Served]) -> None:
    assert len(keys_seen_by_python(both(replicas), [])) == 1


NODE_SCRIPT = """
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
const [target, balanced, protoRoot, calls] = process.argv.slice(1);
const definition = protoLoader.loadSync(
  ['gnau/v1/audit.proto'], {includeDirs: [protoRoot], keepCase: true});
const gnau = grpc.loadPackageDefinition(definition).gnau.v1;
// As clients/node/README.md gives it.
const options = balanced === 'yes'
  ? {'grpc.service_config': JSON.stringify({loadBalancingConfig: [{round_robin: {}}]})}
  : {};
const audit = new gnau.AuditService(target, grpc.credentials.createInsecure(), options);
const seen = new Set();
for (let i = 0; i < Number(calls); i += 1) {
  const keys = await new Promise((resolve, reject) => audit.GetPublicKeys(
    {}, {deadline: Date.now() + 10000},
    (error, answer) => error ? reject(error) : resolve(answer)));
  seen.add(keys.verifier_keys.at(-1));
}
console.log(JSON.stringify([...seen]));
audit.close();
"""


def keys_seen_by_node(target: str, balanced: bool) -> set[str]:
    node = node_executable()
    ran = subprocess.run(
        [node, "--input-type=module", "-e", NODE_SCRIPT, target, "yes" if balanced else "no",
         str(Path(NODE_CLIENT).parents[1] / "proto"), str(CALLS)],
        cwd=NODE_CLIENT, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return set(json.loads(ran.stdout))


def test_node_round_robin_reaches_every_replica(replicas: tuple[Served, Served]) -> None:
    assert keys_seen_by_node(both(replicas), balanced=True) == {r.vkey for r in replicas}
    assert len(keys_seen_by_node(both(replicas), balanced=False)) == 1
