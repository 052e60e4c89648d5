/* fmtsim's bridge to cpfloat (cpfloat_binary32.h, cpfloat_binary64.h: Fasi and Mikaitis, LGPL-2.1).
 * Compiled on first use by fmtsim.conformance.impls.cpfloat, as C, against the user's own copy of
 * cpfloat (found through $CPFLOAT_INCLUDE or $CPFLOAT_PATH, or a standard include folder); fmtsim
 * carries none of cpfloat's code. It only fills cpfloat's option struct and calls cpfloatf /
 * cpfloat on whole arrays, so the values are cpfloat's. */
#include <stddef.h>
#include <string.h>

#include "cpfloat_binary32.h"
#include "cpfloat_binary64.h"

/* One call: round the n values at x (float when src is 0, double when 1) into out (same type).
 * preset: a format name cpfloat_populate_optstruct_from_format knows ("q43", "q52", ...), whose
 * precision and exponent range it sets; or "" for a custom format of precision / emin / emax.
 * round, saturation, infinity and subnormal are cpfloat's enum values; every other option is
 * cpfloat's default (explim on, no soft faults). Returns cpfloat's status (0: no warning), or
 * -100 when the preset is unknown to this cpfloat. */
int fmtsim_cpfloat_round(int src, const void *x, void *out, size_t n, const char *preset, int precision,
                         int emin, int emax, int round, int saturation, int infinity, int subnormal) {
  optstruct *fpopts = init_optstruct();
  int status;
  if (fpopts == NULL) return -101;
  strncpy(fpopts->format, preset[0] ? preset : "custom", sizeof fpopts->format - 1);
  fpopts->format[sizeof fpopts->format - 1] = '\0';
  if (cpfloat_populate_optstruct_from_format(fpopts) < 0) {
    free_optstruct(fpopts);
    return -100;
  }
  if (!preset[0]) {
    fpopts->precision = (cpfloat_precision_t)precision;
    fpopts->emin = emin;
    fpopts->emax = emax;
    fpopts->explim = CPFLOAT_EXPRANGE_TARG;
    fpopts->flip = CPFLOAT_SOFTERR_NO;
    fpopts->p = 0.0;
  }
  fpopts->round = (cpfloat_rounding_t)round;
  fpopts->saturation = (cpfloat_saturation_t)saturation;
  fpopts->infinity = (cpfloat_infinity_t)infinity;
  fpopts->subnormal = (cpfloat_subnormal_t)subnormal;
  if (src == 0)
    status = cpfloatf((float *)out, (const float *)x, n, fpopts);
  else
    status = cpfloat((double *)out, (const double *)x, n, fpopts);
  free_optstruct(fpopts);
  return status;
}
