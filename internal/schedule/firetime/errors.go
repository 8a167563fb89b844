package firetime

import (
	"errors"
	"strconv"
)

// ErrInvalid is wrapped by every error this package returns for invalid
// input, so callers can test errors.Is(err, ErrInvalid) and map it to the
// API's "invalid" code.
var ErrInvalid = errors.New("invalid schedule")

// API field names used in FieldError.Field.
const (
	// FieldCronExpr is the API field holding a cron expression.
	FieldCronExpr = "cron_expr"
	// FieldPlanType is the API field holding a plan's type.
	FieldPlanType = "plan.plan_type"
	// FieldPlanValue is the API field holding a plan's value.
	FieldPlanValue = "plan.plan_value"
	// FieldPlanRepet is the API field holding a plan's repeat count.
	FieldPlanRepet = "plan.plan_repet"
	// FieldPlanTime is the API field holding a plan's time.
	FieldPlanTime = "plan.plan_time"
)

// FieldError reports which API field of a schedule is invalid and why. Every
// FieldError wraps ErrInvalid (and Err, when set).
//
// Its message starts with the API field: `cron_expr: field "day-of-month":
// value 32 out of range 1-31`, `cron_expr: expected 5, 6 or 7 fields, got 4`,
// `plan.plan_value: week day must be 0-6`.
type FieldError struct {
	// Field is the API field path: FieldCronExpr or one of the FieldPlan*.
	Field string
	// Part is, for FieldCronExpr, the cron field at fault ("second",
	// "minute", "hour", "day-of-month", "month", "day-of-week", "year") or
	// "@every"; it is empty when the problem concerns the whole expression.
	Part string
	// Reason says what is wrong, for a human.
	Reason string
	// Err is the underlying cause, if any (e.g. from time.ParseDuration).
	Err error
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Part != "" {
		return e.Field + ": field " + strconv.Quote(e.Part) + ": " + e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap returns ErrInvalid and, when set, Err.
func (e *FieldError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}
