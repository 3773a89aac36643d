/*
 * provenance.h - the cmf.provenance block of a converted model.
 *
 * A conversion adds its own keys (the seed's "weight_quant" and "blr":
 * method, budgets, plan, clipped tensors, strict totals, calibration) to
 * whatever provenance the source model carried (its importer's): the added
 * object's top-level keys replace the source's keys of the same name, the
 * rest of the source's block stays.
 */
#ifndef NV_PROVENANCE_H
#define NV_PROVENANCE_H

/*
 * the merge of add (a JSON object) into old (a JSON object, or NULL for
 * none) as compact JSON in a fresh string; NULL with reason set when add is
 * not a JSON object or old is not valid JSON
 */
char *prov_merge(const char *old, const char *add);

#endif
