package rotaclient_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
)

// TestDependencies submits a chain by refs, reads its links back and
// lists the children of the root; a bad reference names its field.
func TestDependencies(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	ctx := ctxT(t)
	res, err := c.SubmitBatch(ctx, []rotaclient.TaskParams{
		{Kind: "dep", Payload: 1, Ref: "a"},
		{Kind: "dep", Payload: 2, Ref: "b", DependsOn: []string{rotaclient.DependsOnRef("a")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res[0].TaskID, res[1].TaskID
	task, err := c.GetTask(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != rota.StatusWaiting || !slices.Equal(task.DependsOn, []string{a}) {
		t.Fatalf("b: status %s depends_on %v, want WAITING [%s]", task.Status, task.DependsOn, a)
	}
	if task, err = c.GetTask(ctx, a); err != nil || !slices.Equal(task.Dependents, []string{b}) {
		t.Fatalf("a: dependents %v (err %v), want [%s]", task.Dependents, err, b)
	}
	page, err := c.ListTasks(ctx, rotaclient.ListParams{DependsOn: a})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != b {
		t.Fatalf("ListTasks(depends_on a) = %+v, %v; want [%s]", page, err, b)
	}
	_, err = c.Submit(ctx, rotaclient.TaskParams{Kind: "dep", Payload: 3, DependsOn: []string{"nope"}})
	var re *rota.Error
	if !errors.As(err, &re) || re.Field != "depends_on[0]" {
		t.Fatalf("Submit with a bad dependency: %v, want invalid on depends_on[0]", err)
	}
}
