#!/usr/bin/env python3
"""Ports Kueue's TestFindTopologyAssignments table (pkg/cache/scheduler/tas_cache_test.go)
into JSON test data for tessera-queue's TAS core (crates/queue/src/tas/kueue_tests.rs).

Usage: port-kueue-tas-cases.py <tas_cache_test.go> <out.json>

It reads the Go source with a small evaluator for the subset the table uses (composite
literals, builder chains, constants, new/ptr.To) and writes, per case, the nodes, pods,
levels, flavor node labels and PodSets with the expected assignment or reason. Cases that use
something the core does not port (node replacement, feature gates other than the defaults,
preferred affinity, previous assignments, cross-flavor usage) are written with a `skip` reason.
"""
import json
import re
import sys

TOKEN = re.compile(r'''
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<raw>`[^`]*`)
  | (?P<str>"(?:\\.|[^"\\])*")
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<op>:=|\.\.\.|[{}()\[\],:&*.=])
''', re.S | re.X)

CONSTS = {
    'corev1.LabelHostname': 'kubernetes.io/hostname',
    'corev1.ResourceCPU': 'cpu', 'corev1.ResourceMemory': 'memory', 'corev1.ResourcePods': 'pods',
    'corev1.TaintEffectNoSchedule': 'NoSchedule', 'corev1.TaintEffectNoExecute': 'NoExecute',
    'corev1.TaintEffectPreferNoSchedule': 'PreferNoSchedule',
    'corev1.TolerationOpEqual': 'Equal', 'corev1.TolerationOpExists': 'Exists',
    'corev1.NodeSelectorOpIn': 'In', 'corev1.NodeSelectorOpNotIn': 'NotIn',
    'corev1.NodeSelectorOpExists': 'Exists',
    'corev1.PodRunning': 'Running', 'corev1.PodSucceeded': 'Succeeded', 'corev1.PodFailed': 'Failed',
    'corev1.PodPending': 'Pending', 'corev1.NodeReady': 'Ready',
    'corev1.NodeNetworkUnavailable': 'NetworkUnavailable', 'corev1.ConditionTrue': 'True',
    'corev1.ConditionFalse': 'False', 'true': True, 'false': False, 'nil': None,
}


def tokens(text):
    out = []
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == 'ws':
            continue
        out.append((kind, m.group()))
    return out


class Unsupported(Exception):
    pass


class Parser:
    def __init__(self, toks, env):
        self.t, self.i, self.env = toks, 0, env

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else (None, None)

    def eat(self, value=None):
        tok = self.t[self.i]
        if value is not None and tok[1] != value:
            raise SyntaxError(f'expected {value} got {tok} at {self.i}: {self.t[self.i-5:self.i+5]}')
        self.i += 1
        return tok

    def type_expr(self):
        """Skips a type: []T, map[K]V, *T, qualified names, func types are not used."""
        kind, v = self.peek()
        if v == '[':
            self.eat('[')
            if self.peek()[1] != ']':
                self.expr()
            self.eat(']')
            return ('slice', self.type_expr())
        if v == '*':
            self.eat('*')
            return self.type_expr()
        if v == 'map':
            self.eat('map')
            self.eat('[')
            self.type_expr()
            self.eat(']')
            return ('map', self.type_expr())
        if v == 'struct':
            raise Unsupported('struct type')
        self.eat()
        return ('named', v)

    def expr(self):
        kind, v = self.peek()
        if v in ('&', '*'):
            self.eat()
            return self.expr()
        if v == '[' or v == 'map':
            ty = self.type_expr()
            return self.postfix(self.composite(ty))
        if kind == 'str':
            self.eat()
            return json.loads(v)
        if kind == 'raw':
            self.eat()
            return v[1:-1]
        if kind == 'num':
            self.eat()
            return float(v) if '.' in v else int(v)
        if v == '{':
            return self.composite(('anon', None))
        if kind == 'id':
            self.eat()
            nxt = self.peek()[1]
            if nxt == '{' and (v[:1].isupper() or '.' in v) and v not in self.env:
                return self.postfix(self.composite(('named', v)))
            if nxt == '(':
                return self.postfix(self.call(v, None))
            if v in self.env:
                return self.postfix(self.env[v])
            if v in CONSTS:
                return CONSTS[v]
            if v.startswith('features.'):
                return v
            raise Unsupported(f'identifier {v}')
        raise SyntaxError(f'unexpected {kind} {v}')

    def args(self):
        self.eat('(')
        out = []
        while self.peek()[1] != ')':
            out.append(self.expr())
            if self.peek()[1] == '...':
                self.eat()
            if self.peek()[1] == ',':
                self.eat(',')
        self.eat(')')
        return out

    def postfix(self, value):
        while self.peek()[1] == '.' and self.peek(1)[0] == 'id':
            self.eat('.')
            name = self.eat()[1]
            if self.peek()[1] == '(':
                value = self.call(name, value)
            elif isinstance(value, dict) and value.get('kind') == 'ta' and name == 'TopologyAssignment':
                value = {'Levels': value['Levels'], 'Domains': value['Domains']}
            else:
                raise Unsupported(f'field access {name}')
        return value

    def composite(self, ty):
        self.eat('{')
        items, fields, is_map = [], {}, False
        while self.peek()[1] != '}':
            # keyed element?
            start = self.i
            kind, v = self.peek()
            if kind == 'id' and self.peek(1)[1] == ':' and ty[0] != 'map' and '.' not in v and v not in self.env:
                self.eat()
                self.eat(':')
                fields[v] = self.expr()
            else:
                if self.peek()[1] == '{':
                    elem = self.composite(ty[1] if ty[0] == 'slice' else ('anon', None))
                else:
                    elem = self.expr()
                if self.peek()[1] == ':':
                    self.eat(':')
                    is_map = True
                    fields[elem] = self.expr() if self.peek()[1] != '{' else self.composite(('anon', None))
                else:
                    items.append(elem)
            if self.peek()[1] == ',':
                self.eat(',')
        self.eat('}')
        if ty[0] == 'map' or is_map:
            return fields
        if ty[0] == 'slice':
            return items
        if fields or not items:
            return fields
        return items

    def call(self, name, receiver):
        args = self.args()
        short = name.split('.')[-1]
        if receiver is None:
            if name in ('new', 'ptr.To', 'int32', 'int64', 'string', 'corev1.ResourceName',
                        'kueue.PodSetReference', 'kueue.TopologyReference', 'tas.TopologyDomainID',
                        'resources.NewRequestsFromMap', 'kueue.NewPodSetReference'):
                return args[0]
            if name == 'resource.MustParse':
                return {'quantity': args[0]}
            if name == 'testingnode.MakeNode':
                return {'kind': 'node', 'name': args[0], 'labels': {}, 'allocatable': {},
                        'taints': [], 'ready': False, 'unschedulable': False}
            if name == 'testingpod.MakePod':
                return {'kind': 'pod', 'name': args[0], 'node': '', 'phase': '', 'requests': {}}
            if name == 'append':
                return list(args[0]) + [x for a in args[1:] for x in (a if isinstance(a, list) else [a])]
            if name == 'utiltestingapi.MakeTopologyAssignment':
                return {'kind': 'ta', 'Levels': args[0], 'Domains': []}
            if name == 'tas.V1Beta2From':
                raise Unsupported('previousAssignment')
            if name in ('utiltestingapi.MakeWorkload', 'utiltestingapi.MakeAdmission',
                        'utiltestingapi.MakePodSetAssignment',
                        'utiltesting.MakePreferredSchedulingTerms', 'utiltesting.MakeNodeSelectorTerms'):
                return {'kind': 'unsupported', 'what': name}
            raise Unsupported(f'call {name}')
        if isinstance(receiver, dict) and receiver.get('kind') == 'unsupported':
            return receiver
        if isinstance(receiver, dict) and receiver.get('kind') == 'ta':
            if short == 'Domain':
                receiver['Domains'].extend(args)
                return receiver
            if short == 'Obj':
                return receiver
            raise Unsupported(f'topologyAssignment.{short}')
        if isinstance(receiver, dict) and receiver.get('kind') == 'node':
            n = receiver
            if short == 'Label':
                n['labels'][args[0]] = args[1]
            elif short == 'StatusAllocatable':
                n['allocatable'].update({k: v['quantity'] for k, v in args[0].items()})
            elif short == 'Ready':
                n['ready'] = True
            elif short == 'NotReady':
                n['ready'] = False
            elif short == 'Unschedulable':
                n['unschedulable'] = True
            elif short == 'Taints':
                n['taints'].extend(args)
            elif short == 'StatusConditions':
                for cond in args:
                    if cond.get('Type') == 'Ready':
                        n['ready'] = cond.get('Status') == 'True'
            elif short == 'Obj':
                pass
            else:
                raise Unsupported(f'node.{short}')
            return n
        if isinstance(receiver, dict) and receiver.get('kind') == 'pod':
            p = receiver
            if short == 'NodeName':
                p['node'] = args[0]
            elif short == 'Request':
                p['requests'][args[0]] = args[1]
            elif short == 'StatusPhase':
                p['phase'] = args[0]
            elif short == 'Obj':
                pass
            else:
                raise Unsupported(f'pod.{short}')
            return p
        raise Unsupported(f'method {short}')


def split_cases(body_toks):
    """Yields (name, tokens) for each `"name": { ... },` entry of the cases map literal."""
    i = 0
    depth = 0
    while i < len(body_toks):
        kind, v = body_toks[i]
        if depth == 0 and kind in ('str', 'raw') and body_toks[i + 1][1] == ':' and body_toks[i + 2][1] == '{':
            start = i + 2
            d = 0
            j = start
            while True:
                if body_toks[j][1] == '{':
                    d += 1
                elif body_toks[j][1] == '}':
                    d -= 1
                    if d == 0:
                        break
                j += 1
            yield json.loads(v) if kind == 'str' else v[1:-1], body_toks[start:j + 1]
            i = j + 1
            continue
        i += 1


SKIP_FIELDS = {
    'workload': 'node replacement (workload with unhealthy nodes) is not ported',
    'aggregatedDomainUsages': 'cross-flavor usage (TASHandleOverlappingFlavors) is not ported',
    'priorOwnUsage': None,
}


def convert(case, name):
    skip = None
    gates = case.get('featureGates') or {}
    for gate, on in gates.items():
        default_on = {'features.TASMultiLayerTopology': True, 'features.TASProfileMixed': True,
                      'features.TASBalancedPlacement': False,
                      'features.TASRespectNodeAffinityPreferred': False,
                      'features.SkipReassignmentForPodOwnedWorkloads': None}.get(gate)
        if default_on is None or bool(on) != default_on:
            skip = f'feature gate {gate.split(".")[-1]}={str(on).lower()} (not the default) is not ported'
    for field, reason in SKIP_FIELDS.items():
        if field in case and reason:
            skip = skip or reason
    pods = []
    for p in case.get('pods') or []:
        pods.append({'name': p['name'], 'node': p['node'], 'phase': p['phase'],
                     'requests': p['requests']})
    podsets = []
    for ps in case.get('podSets') or []:
        if isinstance(ps.get('nodeAffinity'), dict) and 'PreferredDuringSchedulingIgnoredDuringExecution' in ps['nodeAffinity']:
            skip = skip or 'preferred node affinity (TASRespectNodeAffinityPreferred) is not ported'
        tr = ps.get('topologyRequest')
        request = None
        if tr is not None:
            slices = []
            if tr.get('PodsetSliceRequiredTopologyConstraints'):
                slices = [{'topology': c['Topology'], 'size': c['Size']}
                          for c in tr['PodsetSliceRequiredTopologyConstraints']]
            elif tr.get('PodSetSliceRequiredTopology') is not None:
                slices = [{'topology': tr['PodSetSliceRequiredTopology'],
                           'size': tr.get('PodSetSliceSize') or 0}]
            request = {'required': tr.get('Required'), 'preferred': tr.get('Preferred'),
                       'unconstrained': bool(tr.get('Unconstrained')), 'slices': slices}
            if tr.get('PodSetGroupName') is not None:
                ps.setdefault('podSetGroupName', tr['PodSetGroupName'])
        want = ps.get('wantAssignment')
        podsets.append({
            'name': ps.get('podSetName', ''),
            'count': ps.get('count', 0),
            'requests': ps.get('requests') or {},
            'topologyRequest': request,
            'group': ps.get('podSetGroupName'),
            'nodeSelector': ps.get('nodeSelector') or {},
            'tolerations': ps.get('tolerations') or [],
            'wantAssignment': None if want is None else {
                'levels': want.get('Levels') or [],
                'domains': [{'values': d['Values'], 'count': d['Count']} for d in want.get('Domains') or []],
            },
            'wantReason': ps.get('wantReason', ''),
        })
    nodes = [{'name': n['name'], 'labels': n['labels'], 'allocatable': n['allocatable'],
              'taints': [{'key': t.get('Key', ''), 'value': t.get('Value', ''), 'effect': t.get('Effect', '')}
                         for t in n['taints']],
              'schedulableAndReady': n['ready'] and not n['unschedulable']}
             for n in case.get('nodes') or []]
    out = {'name': name, 'levels': case.get('levels') or [], 'nodeLabels': case.get('nodeLabels') or {},
           'nodes': nodes, 'pods': pods, 'podSets': podsets}
    # The harness's snapshot takes a sibling flavor's usage (TASHandleOverlappingFlavors)
    # instead of the flavor's own when the lowest level is the hostname; either is TAS usage.
    usage = case.get('priorOwnUsage')
    if 'priorFlavorUsage' in case and (case.get('levels') or [''])[-1] == 'kubernetes.io/hostname':
        usage = case['priorFlavorUsage']
    if usage:
        out['priorOwnUsage'] = [{'values': u['Values'], 'count': u['Count'],
                                 'requests': u['SinglePodRequests']} for u in usage]
    if skip:
        out['skip'] = skip
    return out


def main():
    src = open(sys.argv[1]).read()
    start = src.index('func TestFindTopologyAssignments(t *testing.T) {')
    end = src.index('\tfor name, tc := range cases {', start)
    body = src[start:end]
    toks = tokens(body)
    env = {}
    # constants and shared node sets: `name := expr` / `name = "..."` before the cases map
    i = 0
    cases_at = None
    while i < len(toks):
        kind, v = toks[i]
        if v == 'cases' and toks[i + 1][1] == ':=':
            cases_at = i
            break
        if kind == 'id' and i + 1 < len(toks) and toks[i + 1][1] in (':=', '=') and v not in ('func',):
            p = Parser(toks, env)
            p.i = i + 2
            try:
                env[v] = p.expr()
            except (Unsupported, SyntaxError):
                pass
            i = p.i
            continue
        i += 1
    # skip `cases := map[string]struct{...}{`
    j = cases_at
    while toks[j][1] != 'struct':
        j += 1
    depth = 0
    while True:
        if toks[j][1] == '{':
            depth += 1
        elif toks[j][1] == '}':
            depth -= 1
            if depth == 0:
                break
        j += 1
    j += 1  # the cases map literal's '{'
    out = []
    for name, ctoks in split_cases(toks[j + 1:]):
        p = Parser(ctoks, env)
        try:
            case = p.composite(('anon', None))
            out.append(convert(case, name))
        except (Unsupported, SyntaxError, KeyError, TypeError) as err:
            out.append({'name': name, 'skip': f'not convertible: {err}', 'levels': [], 'nodeLabels': {},
                        'nodes': [], 'pods': [], 'podSets': []})
    json.dump(out, open(sys.argv[2], 'w'), indent=1, sort_keys=True)
    skipped = [c for c in out if 'skip' in c]
    print(f'{len(out)} cases, {len(skipped)} skipped', file=sys.stderr)
    for c in skipped:
        print(f'  skip {c["name"]}: {c["skip"]}', file=sys.stderr)


if __name__ == '__main__':
    main()
