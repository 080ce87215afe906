/* policy_factory.c -- the one registry of replacement policies: name -> vtable.
 *
 * POLICIES is the only list of policy names in kvsim.  The engine resolves a
 * level's `policy` through it, and the exports below (declared in engine.h)
 * let sim/_binding.py read it, so configuration validation, the Python
 * reference and the CLI all see exactly this table.  Index 0 is the default
 * (an empty name). */
#include <string.h>

#include "engine.h"
#include "policy.h"

static const kvsimPolicyOps *const POLICIES[] = {
    &kvsimPolicyLru, &kvsimPolicyPlru, &kvsimPolicySrrip, &kvsimPolicyBrrip, &kvsimPolicyRandom,
    &kvsimPolicyQlru,
};
#define NPOLICIES (sizeof POLICIES / sizeof POLICIES[0])

const kvsimPolicyOps *kvsimPolicyByName(const char *name) {
    if (name == NULL || name[0] == '\0') return POLICIES[0]; /* default */
    for (size_t i = 0; i < NPOLICIES; i++)
        if (strcmp(POLICIES[i]->name, name) == 0) return POLICIES[i];
    return NULL;
}

/* --- Exports (engine.h) ----------------------------------------------------- */

uint32_t kvsimPolicyCount(void) { return (uint32_t)NPOLICIES; }

const char *kvsimPolicyName(uint32_t i) { return i < NPOLICIES ? POLICIES[i]->name : NULL; }

int kvsimPolicyPow2Ways(uint32_t i) { return i < NPOLICIES && POLICIES[i]->needs_pow2_ways; }

uint32_t kvsimPolicyMaxWays(uint32_t i) {
    return i < NPOLICIES && POLICIES[i]->needs_pow2_ways ? KVSIM_POW2_POLICY_MAX_WAYS : 0;
}
