// Package suggest finds the known name a mistyped one most likely meant, for error
// messages such as `unknown key "adress" (did you mean "address"?)`. Standard library only,
// so the pure rooms (config, skills) can share it.
package suggest

// Nearest returns the entry of known closest to name by edit distance, or "" when none is
// close enough (within a third of name's length) to be a plausible typo.
func Nearest(name string, known []string) string {
	best, bestDist := "", len(name)/3+1
	for _, k := range known {
		if d := distance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// distance is the edit distance between a and b in which swapping two adjacent letters
// counts as one edit, as it is one slip of the fingers ("lsit" is one edit from "list"):
// the optimal string alignment distance.
func distance(a, b string) int {
	pprev := make([]int, len(b)+1) // row i-2, for transpositions
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pprev[j-2]+1)
			}
		}
		pprev, prev, cur = prev, cur, pprev
	}
	return prev[len(b)]
}
