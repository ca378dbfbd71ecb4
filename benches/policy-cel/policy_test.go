// What each exported ValidatingAdmissionPolicy costs the API server per
// request, measured on kube-apiserver's own code (k8s.io/apiserver's
// policy/validating package, compiled as its plugin compiles a policy) and
// nothing else: no HTTP, no storage, no other admission plugin. The
// latency bench (benches/admission_latency.rs) measures the same policies
// through a running API server; this one isolates their CEL, so a change
// to the export can be measured in seconds and profiled.
//
//	cargo run -q -- admission-policy > /tmp/policies.yaml
//	cd benches/policy-cel && POLICIES=/tmp/policies.yaml go test -bench . -benchmem
//
// The pods are the latency bench's: pass, patched, denied, linux.
package policycel

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// compile mirrors compilePolicy in k8s.io/apiserver's
// plugin/policy/validating/plugin.go (unexported there).
func compile(policy *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	optionalVars := cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	expressionOptionalVars := cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: false}
	compiler, err := cel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		panic(err)
	}
	variables := make([]cel.NamedExpressionAccessor, len(policy.Spec.Variables))
	for i := range policy.Spec.Variables {
		variables[i] = (*validating.Variable)(&policy.Spec.Variables[i])
	}
	compiler.CompileAndStoreVariables(variables, optionalVars, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	if n := len(policy.Spec.MatchConditions); n > 0 {
		accessors := make([]cel.ExpressionAccessor, n)
		for i := range policy.Spec.MatchConditions {
			accessors[i] = (*matchconditions.MatchCondition)(&policy.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(accessors, optionalVars, environment.StoredExpressions), policy.Spec.FailurePolicy, "policy", "validate", policy.Name)
	}
	validations := make([]cel.ExpressionAccessor, len(policy.Spec.Validations))
	messages := make([]cel.ExpressionAccessor, len(policy.Spec.Validations))
	for i, v := range policy.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	return validating.NewValidator(
		compiler.CompileCondition(validations, optionalVars, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(nil, optionalVars, environment.StoredExpressions),
		compiler.CompileCondition(messages, expressionOptionalVars, environment.StoredExpressions),
		policy.Spec.FailurePolicy,
		nil,
	)
}

// policies reads the ValidatingAdmissionPolicies of the file POLICIES names.
func policies(t testing.TB) []*admissionregistrationv1.ValidatingAdmissionPolicy {
	file := os.Getenv("POLICIES")
	if file == "" {
		t.Skip("POLICIES names no file (cargo run -q -- admission-policy > FILE)")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*admissionregistrationv1.ValidatingAdmissionPolicy
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if err != nil {
			break
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind != "ValidatingAdmissionPolicy" {
			continue
		}
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := yaml.UnmarshalStrict(doc, p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no ValidatingAdmissionPolicy", file)
	}
	return out
}

var iis = "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"

func container() corev1.Container {
	return corev1.Container{Name: "web", Image: iis}
}

// pods are the latency bench's four pods.
func pods() map[string]*corev1.Pod {
	windows := map[string]string{"kubernetes.io/os": "windows"}
	user := int64(1000)
	pod := func(name string, spec corev1.PodSpec) *corev1.Pod {
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
			Spec:       spec,
		}
	}
	return map[string]*corev1.Pod{
		"pass": pod("pass", corev1.PodSpec{
			OS:           &corev1.PodOS{Name: "windows"},
			NodeSelector: map[string]string{"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"},
			Containers:   []corev1.Container{container()},
		}),
		"patched": pod("patched", corev1.PodSpec{
			NodeSelector:    windows,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &user},
			Containers:      []corev1.Container{container()},
		}),
		"denied": pod("denied", corev1.PodSpec{
			NodeSelector: windows,
			HostNetwork:  true,
			Containers:   []corev1.Container{container()},
		}),
		"linux": pod("linux", corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			Containers:   []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
		}),
	}
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// attributes of a pod create, as the API server hands them to a policy.
func attributes(pod *corev1.Pod) *admission.VersionedAttributes {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	attr := admission.NewAttributesRecord(pod, nil, gvk, pod.Namespace, pod.Name, podsGVR, "", admission.Create, &metav1.CreateOptions{}, true, &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk}
	va.VersionedObject.Set(pod)
	return va
}

var namespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}

// validate runs one policy on one pod: the outcome (allowed or the first
// denial's message) and whether the matchConditions matched.
func validate(v validating.Validator, pod *corev1.Pod) (string, []string) {
	result := v.Validate(context.Background(), podsGVR, attributes(pod), nil, namespace, celconfig.RuntimeCELCostBudget, nil)
	var messages []string
	outcome := "admit"
	if len(result.Decisions) == 0 {
		outcome = "admit (no decision: the match conditions do not match)"
	}
	for _, d := range result.Decisions {
		switch d.Action {
		case validating.ActionDeny:
			messages = append(messages, d.Message)
			outcome = "deny"
		}
		if d.Evaluation == validating.EvalAdmit && d.Action != validating.ActionDeny && outcome == "admit" {
			outcome = "admit (evaluated)"
		}
		if d.Evaluation == validating.EvalError {
			outcome = "error: " + d.Message
		}
	}
	return outcome, messages
}

// TestOutcomes prints what each policy decides for each pod, so a variant
// is checked for its verdicts before it is timed.
func TestOutcomes(t *testing.T) {
	for _, p := range policies(t) {
		v := compile(p)
		for name, pod := range pods() {
			outcome, messages := validate(v, pod)
			if strings.HasPrefix(outcome, "error") {
				t.Errorf("%s/%s: %s", p.Name, name, outcome)
			}
			t.Logf("%s/%s: %s %q", p.Name, name, outcome, messages)
		}
	}
}

func BenchmarkPolicy(b *testing.B) {
	for _, p := range policies(b) {
		v := compile(p)
		for _, name := range []string{"pass", "patched", "denied", "linux"} {
			pod := pods()[name]
			b.Run(p.Name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					validate(v, pod)
				}
			})
		}
	}
}

// BenchmarkCompile: what storing a policy costs the API server's CEL, which
// compiles (type-checks and cost-estimates) every expression when the policy
// is written and again when its plugin loads it. The checker's work grows
// faster than an expression's length: one long expression costs more than
// the same text split in several.
func BenchmarkCompile(b *testing.B) {
	for _, p := range policies(b) {
		b.Run(p.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				compile(p)
			}
		})
	}
}

// TestVariableCosts prints, for each policy and pod, what each variable
// adds when the variables are read in their order (a variable's own work,
// its inputs having been read before it): heap allocations and CEL cost
// units, both deterministic, so a change to the export can be compared on a
// busy machine. Read with -v.
func TestVariableCosts(t *testing.T) {
	for _, p := range policies(t) {
		compiler, err := cel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
		if err != nil {
			t.Fatal(err)
		}
		variables := make([]cel.NamedExpressionAccessor, len(p.Spec.Variables))
		// The old object's copies are read on an UPDATE only.
		var reads []cel.ExpressionAccessor
		var names []string
		for i, v := range p.Spec.Variables {
			variables[i] = (*validating.Variable)(&p.Spec.Variables[i])
			if !strings.HasPrefix(v.Name, "old_") {
				reads = append(reads, &validating.ValidationCondition{Expression: "size([variables." + v.Name + "]) == 1"})
				names = append(names, v.Name)
			}
		}
		compiler.CompileAndStoreVariables(variables, cel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
		// evaluators[k] reads the first k variables.
		evaluators := make([]cel.ConditionEvaluator, len(reads)+1)
		for k := range evaluators {
			evaluators[k] = compiler.CompileCondition(reads[:k], cel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
		}
		for _, name := range []string{"pass", "patched", "denied"} {
			pod := pods()[name]
			allocs := make([]float64, len(evaluators))
			costs := make([]int64, len(evaluators))
			for k, evaluator := range evaluators {
				run := func() {
					attr := attributes(pod)
					request := cel.CreateAdmissionRequest(attr.Attributes, metav1.GroupVersionResource(podsGVR), metav1.GroupVersionKind(attr.VersionedKind))
					_, remaining, err := evaluator.ForInput(context.Background(), attr, request, cel.OptionalVariableBindings{}, cel.CreateNamespaceObject(namespace), celconfig.RuntimeCELCostBudget)
					if err != nil {
						t.Fatal(err)
					}
					costs[k] = celconfig.RuntimeCELCostBudget - remaining
				}
				allocs[k] = testing.AllocsPerRun(20, run)
			}
			t.Logf("%s/%s: %.0f allocations, %d cost units for all %d variables (%.0f with none read)", p.Name, name, allocs[len(reads)], costs[len(reads)], len(reads), allocs[0])
			order := make([]int, len(reads))
			for i := range order {
				order[i] = i
			}
			added := func(i int) float64 { return allocs[i+1] - allocs[i] }
			sort.Slice(order, func(a, b int) bool { return added(order[a]) > added(order[b]) })
			for _, i := range order[:min(20, len(order))] {
				t.Logf("  %-40s %6.0f allocations %8d cost", names[i], added(i), costs[i+1]-costs[i])
			}
		}
	}
}
