/* policy_factory.c -- the one place that maps a policy name to its vtable. */
#include <string.h>

#include "policy.h"

static const kvsimPolicyOps *const POLICIES[] = {
    &kvsimPolicyLru, &kvsimPolicyPlru, &kvsimPolicySrrip, &kvsimPolicyBrrip, &kvsimPolicyRandom,
};

const kvsimPolicyOps *kvsimPolicyByName(const char *name) {
    if (name == NULL || name[0] == '\0') return &kvsimPolicyLru; /* default */
    for (size_t i = 0; i < sizeof POLICIES / sizeof POLICIES[0]; i++)
        if (strcmp(POLICIES[i]->name, name) == 0) return POLICIES[i];
    return NULL;
}
