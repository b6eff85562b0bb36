package submit

import (
	"fmt"
	"strconv"
	"strings"
)

// Bounds of a --constraint expression.
const (
	// MaxConstraintBytes bounds its text.
	MaxConstraintBytes = 1024
	// MaxConstraintFeatures bounds the feature names it mentions.
	MaxConstraintFeatures = 64
	// MaxConstraintDepth bounds its nesting of parentheses.
	MaxConstraintDepth = 8
	// MaxFeatureBytes bounds one feature name (on a node, too).
	MaxFeatureBytes = 64
)

// FeatureExpr is a boolean expression over node features: a feature Name,
// or Op ('&' or '|') over Kids. A node satisfies it or not.
type FeatureExpr struct {
	Name string
	Op   byte
	Kids []*FeatureExpr
}

// Holds reports whether a node with the features has says it has
// satisfies e.
func (e *FeatureExpr) Holds(has func(feature string) bool) bool {
	switch e.Op {
	case '&':
		for _, k := range e.Kids {
			if !k.Holds(has) {
				return false
			}
		}
		return true
	case '|':
		for _, k := range e.Kids {
			if k.Holds(has) {
				return true
			}
		}
		return false
	}
	return has(e.Name)
}

// String writes e with the parentheses its nesting needs.
func (e *FeatureExpr) String() string {
	if e.Op == 0 {
		return e.Name
	}
	parts := make([]string, len(e.Kids))
	for i, k := range e.Kids {
		parts[i] = k.String()
		if k.Op != 0 {
			parts[i] = "(" + parts[i] + ")"
		}
	}
	return strings.Join(parts, string(e.Op))
}

// CountedExpr is an expression that Count of a job's nodes satisfy.
type CountedExpr struct {
	Expr  *FeatureExpr
	Count int
}

// Constraint is a parsed --constraint, in the parts Slurm's syntax has.
// Every node of the job satisfies All; at least Count of its nodes satisfy
// each of Counted ("gpu*2"); with Match, every node satisfies the same one
// of its alternatives ("[rack1|rack2]", Slurm's matching OR); with Split,
// the job's nodes hold disjoint sets of Count nodes, each satisfying its
// expression ("[rack1*2&rack2*4]", Slurm's multiple counts).
type Constraint struct {
	All     *FeatureExpr
	Counted []CountedExpr
	Match   []*FeatureExpr
	Split   []CountedExpr
}

// Features lists the feature names c mentions, in order, without repeats.
func (c *Constraint) Features() []string {
	var out []string
	seen := map[string]bool{}
	var walk func(e *FeatureExpr)
	walk = func(e *FeatureExpr) {
		if e == nil {
			return
		}
		if e.Op == 0 && !seen[e.Name] {
			seen[e.Name] = true
			out = append(out, e.Name)
		}
		for _, k := range e.Kids {
			walk(k)
		}
	}
	walk(c.All)
	for _, x := range c.Counted {
		walk(x.Expr)
	}
	for _, x := range c.Match {
		walk(x)
	}
	for _, x := range c.Split {
		walk(x.Expr)
	}
	return out
}

// NodesNeeded returns the fewest nodes a job with c can have: the largest
// count, or the sum of Split's counts when that is larger; 1 without
// counts.
func (c *Constraint) NodesNeeded() int {
	n, sum := 1, 0
	for _, x := range c.Counted {
		n = max(n, x.Count)
	}
	for _, x := range c.Split {
		sum += x.Count
	}
	return max(n, sum)
}

// Counts reports whether c has a part that not every node satisfies alike
// (a count, a matching OR or multiple counts): a single node can satisfy
// it only if its counts are 1.
func (c *Constraint) Counts() bool {
	return len(c.Counted) > 0 || len(c.Match) > 0 || len(c.Split) > 0
}

// ParseConstraint reads a --constraint expression as Slurm writes one:
//
//	intel                 a feature every node has
//	intel&ib, a|b         AND and OR of features; mixing both at one level
//	                      needs parentheses: (a|b)&ib
//	gpu*2                 at least 2 of the job's nodes have gpu (a count
//	                      applies to a term of the outermost AND)
//	[rack1|rack2]         matching OR: all nodes have the same one
//	[rack1*2&rack2*4]     multiple counts: 2 nodes with rack1, 4 others
//	                      with rack2
//	[(a|b)*1&c*2]         parentheses group features inside brackets
//
// At most one bracket group, outside any parentheses; feature names are
// letters, digits, '.', '-' and '_'. Errors name --constraint and the
// byte where the expression went wrong.
func ParseConstraint(s string) (*Constraint, error) {
	bad := func(format string, args ...any) error {
		return optionError("--constraint", s, nil, format, args...)
	}
	switch {
	case s == "":
		return nil, bad("empty expression (give features, e.g. --constraint=intel&ib)")
	case len(s) > MaxConstraintBytes:
		return nil, bad("the expression is %d bytes long; the most is %d", len(s), MaxConstraintBytes)
	}
	p := &constraintParser{s: s}
	c, err := p.top()
	if err == nil && p.i < len(s) {
		err = p.errorf("unexpected %q", s[p.i])
	}
	if err == nil && p.names > MaxConstraintFeatures {
		err = fmt.Errorf("it names %d features; the most is %d", p.names, MaxConstraintFeatures)
	}
	if err != nil {
		return nil, bad("%v (e.g. --constraint=intel&ib, a|b, gpu*2, [rack1|rack2] or [a*2&b*4])", err)
	}
	return c, nil
}

type constraintParser struct {
	s     string
	i     int
	depth int
	names int
	// bracket records that the expression has had its bracket group.
	bracket bool
}

func (p *constraintParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *constraintParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// item is one term of a chain: an expression with an optional count, or a
// bracket group (a constraint of its own with Match or Split).
type item struct {
	expr    *FeatureExpr
	count   int
	bracket *Constraint
}

// top reads the outermost chain.
func (p *constraintParser) top() (*Constraint, error) {
	items, op, err := p.chain(true)
	if err != nil {
		return nil, err
	}
	c := &Constraint{}
	if op == '|' {
		e := &FeatureExpr{Op: '|'}
		for _, it := range items {
			if it.count > 0 || it.bracket != nil {
				return nil, fmt.Errorf("a count or a bracket group cannot be an alternative of '|' (write [a|b] for a matching OR, (a|b)*2 for a count)")
			}
			e.Kids = append(e.Kids, it.expr)
		}
		c.All = e
		return c, nil
	}
	var every []*FeatureExpr
	for _, it := range items {
		switch {
		case it.bracket != nil:
			c.Match, c.Split = it.bracket.Match, it.bracket.Split
		case it.count > 0:
			c.Counted = append(c.Counted, CountedExpr{Expr: it.expr, Count: it.count})
		default:
			every = append(every, it.expr)
		}
	}
	switch len(every) {
	case 0:
	case 1:
		c.All = every[0]
	default:
		c.All = &FeatureExpr{Op: '&', Kids: every}
	}
	return c, nil
}

// chain reads terms joined by one operator; top says whether counts and a
// bracket group may appear (the outermost level only).
func (p *constraintParser) chain(top bool) ([]item, byte, error) {
	var items []item
	var op byte
	for {
		it, err := p.term(top)
		if err != nil {
			return nil, 0, err
		}
		items = append(items, it)
		c := p.peek()
		if c != '&' && c != '|' {
			return items, op, nil
		}
		if op != 0 && c != op {
			return nil, 0, p.errorf("mixes '&' and '|' at one level; add parentheses, e.g. (a|b)&c")
		}
		op = c
		p.i++
	}
}

// term reads a feature, a parenthesised expression or (at the top) a
// bracket group, and (at the top) an optional "*COUNT".
func (p *constraintParser) term(top bool) (item, error) {
	var it item
	switch c := p.peek(); {
	case c == '[':
		if !top || p.bracket {
			return it, p.errorf("a bracket group may appear once, outside parentheses")
		}
		p.bracket = true
		p.i++
		b, err := p.bracketGroup()
		if err != nil {
			return it, err
		}
		if p.peek() != ']' {
			return it, p.errorf("expected ']'")
		}
		p.i++
		if p.peek() == '*' {
			return it, p.errorf("a bracket group takes no count; put counts inside it, e.g. [a*2&b*4]")
		}
		it.bracket = b
		return it, nil
	default:
		e, err := p.operand()
		if err != nil {
			return it, err
		}
		it.expr = e
	}
	if p.peek() == '*' {
		if !top {
			return it, p.errorf("a count applies to a term of the outermost '&' or of a bracket group, not inside parentheses")
		}
		n, err := p.count()
		if err != nil {
			return it, err
		}
		it.count = n
	}
	return it, nil
}

// operand reads a feature name or a parenthesised expression.
func (p *constraintParser) operand() (*FeatureExpr, error) {
	if p.peek() == '(' {
		if p.depth >= MaxConstraintDepth {
			return nil, p.errorf("parentheses nest deeper than %d", MaxConstraintDepth)
		}
		p.depth++
		p.i++
		items, op, err := p.chain(false)
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, p.errorf("expected ')'")
		}
		p.i++
		p.depth--
		if len(items) == 1 {
			return items[0].expr, nil
		}
		e := &FeatureExpr{Op: op}
		for _, it := range items {
			e.Kids = append(e.Kids, it.expr)
		}
		return e, nil
	}
	start := p.i
	for p.i < len(p.s) && featureByte(p.s[p.i]) {
		p.i++
	}
	name := p.s[start:p.i]
	switch {
	case name == "" && p.i < len(p.s):
		return nil, p.errorf("%q is not part of a feature name, an operator (&, |, *) or a bracket", p.s[p.i])
	case name == "":
		return nil, p.errorf("the expression ends where a feature was expected")
	case len(name) > MaxFeatureBytes:
		return nil, fmt.Errorf("feature %q… is longer than %d bytes", name[:MaxFeatureBytes], MaxFeatureBytes)
	case name[0] == '-' || name[0] == '.':
		return nil, fmt.Errorf("feature %q must start with a letter, a digit or '_'", name)
	}
	p.names++
	return &FeatureExpr{Name: name}, nil
}

// count reads "*N".
func (p *constraintParser) count() (int, error) {
	p.i++
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	n, err := strconv.Atoi(p.s[start:p.i])
	if err != nil || n < 1 || n > MaxNodes {
		return 0, fmt.Errorf("at byte %d: a count is a whole number from 1 to %d", start, MaxNodes)
	}
	return n, nil
}

// bracketGroup reads the inside of [...]: alternatives joined by '|'
// (without counts) or counted terms joined by '&' (each with a count).
func (p *constraintParser) bracketGroup() (*Constraint, error) {
	var items []item
	var op byte
	for {
		e, err := p.operand()
		if err != nil {
			return nil, err
		}
		it := item{expr: e}
		if p.peek() == '*' {
			if it.count, err = p.count(); err != nil {
				return nil, err
			}
		}
		items = append(items, it)
		c := p.peek()
		if c != '&' && c != '|' {
			break
		}
		if op != 0 && c != op {
			return nil, p.errorf("a bracket group is either a matching OR [a|b] or multiple counts [a*2&b*4], not both")
		}
		op = c
		p.i++
	}
	c := &Constraint{}
	counted := items[0].count > 0
	for _, it := range items {
		switch {
		case op == '|' && it.count > 0:
			return nil, fmt.Errorf("the alternatives of a matching OR [a|b] take no counts")
		case op == '&' && it.count == 0:
			return nil, fmt.Errorf("every term of multiple counts needs a count, e.g. [a*2&b*4]")
		case counted:
			c.Split = append(c.Split, CountedExpr{Expr: it.expr, Count: it.count})
		default:
			c.Match = append(c.Match, it.expr)
		}
	}
	return c, nil
}

func featureByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}

// FeatureProblem says what is wrong with a node feature's name, or "": a
// feature is named as a node is (NameProblem), in at most MaxFeatureBytes.
func FeatureProblem(name string) string { return NameProblem(name, MaxFeatureBytes) }
