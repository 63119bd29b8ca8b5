// k8s_validate.mjs — validates deploy/k8s/*.yaml against the Kubernetes API schemas that
// the kubernetes-models package bundles (ajv validators generated from Kubernetes'
// OpenAPI spec), checks that kustomization.yaml lists every manifest, that the ConfigMap's
// config.json passes `nanoserve config check`, and the deployment rules deploy/README.md
// promises (probes, grace period, security context). Then it breaks copies in a temp dir
// and expects each to be rejected, so a pass means something.
//   node k8s_validate.mjs NANOSERVE_BINARY K8S_DIR    (the CTest entry: deploy_k8s_schema)
//   node k8s_validate.mjs --check K8S_DIR             (schemas only, for editing manifests)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import YAML from "yaml";

// apiVersion -> the kubernetes-models module holding its kinds
function modulePath(apiVersion) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  return `kubernetes-models/${group ? group + "/" : ""}${version}`;
}

async function schemaErrors(doc) {
  if (!doc || typeof doc !== "object" || !doc.apiVersion || !doc.kind)
    return ["not a Kubernetes object (apiVersion and kind missing)"];
  let mod;
  try {
    mod = await import(modulePath(doc.apiVersion));
  } catch {
    return [`unknown apiVersion ${doc.apiVersion}`];
  }
  const Model = mod[doc.kind];
  if (!Model) return [`unknown kind ${doc.kind} in ${doc.apiVersion}`];
  try {
    new Model(doc).validate();
    return [];
  } catch (e) {
    return [String(e.message || e)];
  }
}

// Every YAML file of DIR: parse (duplicate keys are errors), validate each document.
// Returns {errors: [...], objects: [{file, doc}], kustomization}.
async function validateDir(dir) {
  const errors = [], objects = [];
  let kustomization = null;
  const files = fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort();
  if (files.length === 0) errors.push(`${dir}: no YAML files`);
  for (const f of files) {
    const docs = YAML.parseAllDocuments(fs.readFileSync(path.join(dir, f), "utf8"));
    for (const d of docs) {
      if (d.errors.length) {
        errors.push(`${f}: ${d.errors.map((e) => e.message).join("; ")}`);
        continue;
      }
      const doc = d.toJS();
      if (doc === null) continue;
      if (doc.kind === "Kustomization") {
        kustomization = { file: f, doc };
        continue;
      }
      for (const e of await schemaErrors(doc)) errors.push(`${f}: ${doc.kind || "?"}: ${e}`);
      objects.push({ file: f, doc });
    }
  }
  if (kustomization) {
    const listed = new Set(kustomization.doc.resources || []);
    for (const r of listed)
      if (!fs.existsSync(path.join(dir, r))) errors.push(`kustomization.yaml lists missing ${r}`);
    for (const f of new Set(objects.map((o) => o.file)))
      if (!listed.has(f)) errors.push(`kustomization.yaml does not list ${f}`);
  }
  return { errors, objects };
}

function find(objects, kind) {
  return objects.filter((o) => o.doc.kind === kind).map((o) => o.doc);
}

// What deploy/README.md promises of the manifests, beyond the schemas.
function deploymentRules(objects, binary) {
  const errors = [];
  const need = (cond, msg) => cond || errors.push(msg);
  const [cm] = find(objects, "ConfigMap");
  const [dep] = find(objects, "Deployment");
  const [hpa] = find(objects, "HorizontalPodAutoscaler");
  if (!cm || !dep || !hpa) return ["a ConfigMap, a Deployment and an HPA are expected"];
  need(find(objects, "Service").length && find(objects, "PodDisruptionBudget").length &&
       find(objects, "PersistentVolumeClaim").length, "Service, PDB or PVC missing");

  // the one config file: valid, and what the pod relies on
  const cfgText = cm.data && cm.data["config.json"];
  need(cfgText, "ConfigMap has no config.json");
  let cfg = {};
  if (cfgText) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ns-k8s-cfg-"));
    fs.writeFileSync(path.join(tmp, "config.json"), cfgText);
    if (binary) {
      try {
        execFileSync(binary, ["config", "check", path.join(tmp, "config.json")], { stdio: "pipe" });
      } catch (e) {
        errors.push(`ConfigMap config.json fails config check: ${e.stdout}${e.stderr}`);
      }
    }
    fs.rmSync(tmp, { recursive: true });
    cfg = JSON.parse(cfgText);
  }
  const srv = cfg.server || {};
  need(srv.host === "0.0.0.0", "config server.host must be 0.0.0.0 in a pod");
  const pod = dep.spec.template.spec;
  const c = pod.containers[0];
  const port = (c.ports || []).find((p) => p.name === "http");
  need(port && port.containerPort === (srv.port ?? 8080), "container port != server.port");
  const mounts = Object.fromEntries((c.volumeMounts || []).map((m) => [m.mountPath, m]));
  const vols = Object.fromEntries((pod.volumes || []).map((v) => [v.name, v]));
  const cfgMount = mounts["/etc/nanoserve/config.json"];
  need(cfgMount && vols[cfgMount.name]?.configMap?.name === cm.metadata.name,
       "config.json is not mounted from the ConfigMap at /etc/nanoserve/config.json");
  const keys = srv.api_keys_file || "";
  const keysMount = Object.values(mounts).find((m) => keys.startsWith(m.mountPath + "/"));
  need(keys && keysMount && vols[keysMount.name]?.secret?.secretName,
       "server.api_keys_file is not a file of a mounted Secret");
  const model = (cfg.engine || {}).model || "";
  need(model.startsWith("/var/lib/nanoserve/models/") && mounts["/var/lib/nanoserve/models"],
       "engine.model is not under the mounted /var/lib/nanoserve/models");
  need(mounts["/tmp"] && vols[mounts["/tmp"].name]?.emptyDir, "no emptyDir at /tmp");

  // probes: /ready to start (>= 10 min for the model load) and for readiness, /health live
  const sp = c.startupProbe, rp = c.readinessProbe, lp = c.livenessProbe;
  need(sp?.httpGet?.path === "/ready" && (sp.periodSeconds ?? 10) * (sp.failureThreshold ?? 3) >= 600,
       "startupProbe must poll /ready for at least 10 minutes");
  need(rp?.httpGet?.path === "/ready", "readinessProbe must poll /ready");
  need(lp?.httpGet?.path === "/health", "livenessProbe must poll /health");
  // shutdown: preStop sleep + drain + margin fits in the grace period
  const sleep = Number((c.lifecycle?.preStop?.exec?.command || [])[1] || 0);
  need(sleep > 0, "no preStop sleep");
  need((pod.terminationGracePeriodSeconds ?? 30) >= sleep + (srv.drain_timeout_s ?? 30) + 5,
       "terminationGracePeriodSeconds < preStop sleep + server.drain_timeout_s + 5");
  need(c.resources?.limits?.["nvidia.com/gpu"] === 1, "no nvidia.com/gpu: 1 limit");
  // security context
  const sc = c.securityContext || {}, psc = pod.securityContext || {};
  need(psc.runAsNonRoot === true && sc.runAsNonRoot !== false, "runAsNonRoot");
  need(sc.readOnlyRootFilesystem === true, "readOnlyRootFilesystem");
  need(sc.allowPrivilegeEscalation === false, "allowPrivilegeEscalation: false");
  need(JSON.stringify(sc.capabilities?.drop) === '["ALL"]', "capabilities drop ALL");
  need((sc.seccompProfile || psc.seccompProfile)?.type === "RuntimeDefault", "seccomp RuntimeDefault");
  // the HPA scales this Deployment on the waiting-requests gauge
  need(hpa.spec.scaleTargetRef.name === dep.metadata.name, "HPA targets another Deployment");
  need(hpa.spec.metrics.some((m) => m.pods?.metric?.name === "nanoserve_num_requests_waiting"),
       "HPA does not use nanoserve_num_requests_waiting");
  return errors;
}

// ---- main ----------------------------------------------------------------------------------
const args = process.argv.slice(2);
const checkOnly = args[0] === "--check";
const binary = checkOnly ? null : path.resolve(args[0] || "");
const dir = path.resolve(args[1] || "");
if (!args[1]) {
  console.error("usage: node k8s_validate.mjs (NANOSERVE_BINARY | --check) K8S_DIR");
  process.exit(2);
}

const { errors, objects } = await validateDir(dir);
if (!checkOnly) errors.push(...deploymentRules(objects, binary));
for (const o of objects) console.log(`${o.file}: ${o.doc.apiVersion} ${o.doc.kind} ${o.doc.metadata?.name}`);
if (errors.length) {
  console.log("FAIL:\n  " + errors.join("\n  "));
  process.exit(1);
}
console.log(`${objects.length} objects valid against the Kubernetes API schemas (kubernetes-models)`);
if (checkOnly) process.exit(0);

// negative checks: each broken copy must be rejected, by the schemas or by the rules
const broken = [
  ["replicas as a string", "deployment.yaml", (t) => t.replace("replicas: 1", 'replicas: "one"')],
  ["selector removed", "deployment.yaml", (t) => t.replace(/  selector:\n    matchLabels:\n      app.kubernetes.io\/name: nanoserve\n  strategy/, "  strategy")],
  ["a probe port as an object", "deployment.yaml", (t) => t.replace("port: http", "port: {name: http}")],
  ["unknown Service type", "service.yaml", (t) => t.replace("type: ClusterIP", "type: Cluster")],
  ["HPA without maxReplicas", "hpa.yaml", (t) => t.replace("  maxReplicas: 4\n", "")],
  ["PDB in a wrong apiVersion", "pdb.yaml", (t) => t.replace("policy/v1", "policy/v0")],
  ["duplicate key", "service.yaml", (t) => t.replace("  type: ClusterIP", "  type: ClusterIP\n  type: NodePort")],
  ["config check fails", "configmap.yaml", (t) => t.replace('"port": 8080', '"port": 99999')],
  ["short grace period", "deployment.yaml", (t) => t.replace("terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: 20")],
];
let bad = 0;
for (const [what, file, edit] of broken) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ns-k8s-bad-"));
  for (const f of fs.readdirSync(dir)) if (/\.ya?ml$/.test(f)) fs.copyFileSync(path.join(dir, f), path.join(tmp, f));
  const before = fs.readFileSync(path.join(tmp, file), "utf8");
  const after = edit(before);
  if (after === before) {
    console.log(`FAIL: negative check '${what}' could not edit ${file}`);
    bad++;
  } else {
    fs.writeFileSync(path.join(tmp, file), after);
    const r = await validateDir(tmp);
    const errs = r.errors.concat(deploymentRules(r.objects, binary));
    if (errs.length === 0) {
      console.log(`FAIL: a copy with ${what} (${file}) was accepted`);
      bad++;
    } else console.log(`rejected as expected: ${what}: ${errs[0].split("\n")[0]}`);
  }
  fs.rmSync(tmp, { recursive: true });
}
if (bad) process.exit(1);
console.log("k8s_validate: ok");
