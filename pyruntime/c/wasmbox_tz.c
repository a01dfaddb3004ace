/*
 * Local time for the wasmbox interpreter: wasi-libc's time zone hooks, written here because wasi-libc ships them
 * as stubs that always answer UTC (it has no time zone tables).
 *
 * wasi-libc's localtime_r, mktime and strftime (musl's code) ask three internal functions for the zone:
 * __secs_to_zone, __tm_to_tzname and the string __utc. This file defines all three (so libc's stub object is never
 * linked) and tzset(), with the usual semantics:
 *
 *   TZ unset         /etc/localtime if it exists (it does not in the sandbox), else UTC
 *   TZ=""            UTC
 *   TZ="EST5EDT,M3.2.0,M11.1.0" (POSIX form: a name, an offset, optionally a DST name, offset and rules)
 *   TZ="Europe/Paris" or ":Europe/Paris"   the TZif file /usr/share/zoneinfo/Europe/Paris (the tzdata mount)
 *   TZ="/abs/path"   that TZif file
 *
 * Anything that cannot be read or parsed means UTC, as in musl. TZ is re-read on every call (a string compare),
 * so local time follows os.environ["TZ"] like on Linux; time.tzset() recomputes the time module's constants.
 *
 * Bounds: a zone file is read only up to MAX_ZONE_FILE bytes, every count in it is checked against its length,
 * a TZ value longer than MAX_TZ is UTC, and a relative name must not contain "..".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ZONE_FILE (256 * 1024)
#define MAX_TZ 255
#define NAME_MAX_TZ 15
#define ZONEINFO "/usr/share/zoneinfo/"

const char __utc[] = "UTC";

struct rule {
    int kind;       /* 'J' (1..365, no Feb 29), 'D' (0..365), 'M' (month.week.day) */
    int a, b, c;    /* J/D: day; M: month, week, weekday */
    long secs;      /* time of day of the change, local wall clock */
};

struct posix_tz {
    int valid;
    char std[NAME_MAX_TZ + 1], dst[NAME_MAX_TZ + 1];
    long stdoff, dstoff; /* seconds east of UTC */
    int has_dst, has_rules;
    struct rule start, end;
};

struct ttinfo {
    int32_t off;
    uint8_t isdst;
    uint8_t abbr;
};

static struct {
    int loaded;             /* cache valid for tz_key */
    char key[MAX_TZ + 2];   /* the TZ value the state was computed for ("\1" for unset) */
    /* TZif data (zone == NULL: none) */
    unsigned char *zone;
    size_t timecnt, typecnt, charcnt;
    const unsigned char *trans; /* timecnt * 8 (v2) or * 4 (v1) */
    int tsize;
    const unsigned char *idx;
    struct ttinfo *types;
    char *abbr;
    /* POSIX rule: TZ itself, or the TZif footer */
    struct posix_tz posix;
} tzs;

static long
getnum(const char **p, int *ok)
{
    long v = 0;
    int n = 0;
    while (**p >= '0' && **p <= '9' && n < 9) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    if (n == 0) {
        *ok = 0;
    }
    return v;
}

/* [+-]hh[:mm[:ss]] -> seconds (sign as written) */
static long
gettime(const char **p, int *ok)
{
    int neg = 0;
    if (**p == '+' || **p == '-') {
        neg = **p == '-';
        (*p)++;
    }
    long s = getnum(p, ok) * 3600;
    if (**p == ':') {
        (*p)++;
        s += getnum(p, ok) * 60;
        if (**p == ':') {
            (*p)++;
            s += getnum(p, ok);
        }
    }
    return neg ? -s : s;
}

static int
getname(const char **p, char *out)
{
    size_t n = 0;
    if (**p == '<') {
        (*p)++;
        while (**p && **p != '>') {
            if (n < NAME_MAX_TZ) {
                out[n++] = **p;
            }
            (*p)++;
        }
        if (**p != '>') {
            return 0;
        }
        (*p)++;
    } else {
        while ((**p >= 'a' && **p <= 'z') || (**p >= 'A' && **p <= 'Z')) {
            if (n < NAME_MAX_TZ) {
                out[n++] = **p;
            }
            (*p)++;
        }
    }
    out[n] = 0;
    return n >= 3 || (n > 0 && out[0] != 0);
}

static int
getrule(const char **p, struct rule *r)
{
    int ok = 1;
    if (**p == 'J') {
        (*p)++;
        r->kind = 'J';
        r->a = (int)getnum(p, &ok);
        if (r->a < 1 || r->a > 365) {
            return 0;
        }
    } else if (**p == 'M') {
        (*p)++;
        r->kind = 'M';
        r->a = (int)getnum(p, &ok);
        if (**p != '.') {
            return 0;
        }
        (*p)++;
        r->b = (int)getnum(p, &ok);
        if (**p != '.') {
            return 0;
        }
        (*p)++;
        r->c = (int)getnum(p, &ok);
        if (r->a < 1 || r->a > 12 || r->b < 1 || r->b > 5 || r->c > 6) {
            return 0;
        }
    } else {
        r->kind = 'D';
        r->a = (int)getnum(p, &ok);
        if (r->a > 365) {
            return 0;
        }
    }
    r->secs = 7200;
    if (**p == '/') {
        (*p)++;
        r->secs = gettime(p, &ok);
    }
    return ok;
}

/* Parses a POSIX TZ string; returns 0 if it is not one. */
static int
parse_posix(const char *s, struct posix_tz *z)
{
    int ok = 1;
    memset(z, 0, sizeof *z);
    if (!getname(&s, z->std)) {
        return 0;
    }
    if (!(*s == '+' || *s == '-' || (*s >= '0' && *s <= '9'))) {
        return 0;
    }
    z->stdoff = -gettime(&s, &ok);
    if (!ok) {
        return 0;
    }
    if (*s && *s != ',') {
        if (!getname(&s, z->dst)) {
            return 0;
        }
        z->has_dst = 1;
        z->dstoff = z->stdoff + 3600;
        if (*s == '+' || *s == '-' || (*s >= '0' && *s <= '9')) {
            z->dstoff = -gettime(&s, &ok);
        }
    }
    if (z->has_dst) {
        if (*s == ',') {
            s++;
            if (!getrule(&s, &z->start) || *s != ',') {
                return 0;
            }
            s++;
            if (!getrule(&s, &z->end)) {
                return 0;
            }
        } else {
            /* No rules: the US rules, as glibc and musl assume. */
            z->start = (struct rule){'M', 3, 2, 0, 7200};
            z->end = (struct rule){'M', 11, 1, 0, 7200};
        }
        z->has_rules = 1;
    }
    if (*s != 0 || !ok) {
        return 0;
    }
    z->valid = 1;
    return 1;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1..12). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int64_t
year_of(int64_t t)
{
    int64_t z = (t >= 0 ? t : t - 86399) / 86400 + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    return yoe + era * 400 + (m <= 2);
}

static int
is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Local wall-clock seconds (from the epoch) at which rule r fires in year y. */
static int64_t
rule_time(const struct rule *r, int64_t y)
{
    int64_t day;
    if (r->kind == 'J') {
        day = days_from_civil(y, 1, 1) + r->a - 1 + (is_leap(y) && r->a >= 60);
    } else if (r->kind == 'D') {
        day = days_from_civil(y, 1, 1) + r->a;
    } else {
        static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        int64_t first = days_from_civil(y, r->a, 1);
        int wday = (int)(((first + 4) % 7 + 7) % 7);
        int64_t d = first + (r->c - wday + 7) % 7 + 7 * (r->b - 1);
        int len = mdays[r->a - 1] + (r->a == 2 && is_leap(y));
        while (d >= first + len) {
            d -= 7;
        }
        day = d;
    }
    return day * 86400 + r->secs;
}

static void
posix_zone(const struct posix_tz *z, int64_t t, int local, int *isdst, long *off, long *opp, const char **name)
{
    int dst = 0;
    if (z->has_dst && z->has_rules) {
        /* t as standard local time decides the year; rules are wall-clock: start in standard, end in DST time. */
        int64_t y = year_of(local ? t : t + z->stdoff);
        int64_t s = rule_time(&z->start, y), e = rule_time(&z->end, y);
        int64_t ts = local ? t : t + z->stdoff, td = local ? t : t + z->dstoff;
        if (s < e) {
            dst = ts >= s && td < e;
        } else {
            dst = !(td >= e && ts < s);
        }
    }
    *isdst = dst;
    *off = dst ? z->dstoff : z->stdoff;
    if (opp) {
        *opp = z->has_dst ? (dst ? z->stdoff : z->dstoff) : z->stdoff;
    }
    *name = dst ? z->dst : z->std;
}

static uint32_t
rd32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t
trans_at(size_t i)
{
    const unsigned char *p = tzs.trans + i * (size_t)tzs.tsize;
    if (tzs.tsize == 8) {
        return (int64_t)((uint64_t)rd32(p) << 32 | rd32(p + 4));
    }
    return (int32_t)rd32(p);
}

static void
free_zone(void)
{
    free(tzs.zone);
    free(tzs.types);
    free(tzs.abbr);
    tzs.zone = NULL;
    tzs.types = NULL;
    tzs.abbr = NULL;
    tzs.timecnt = tzs.typecnt = tzs.charcnt = 0;
}

/* Reads a whole zone file (at most MAX_ZONE_FILE bytes); NULL if it cannot. */
static unsigned char *
read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        return NULL;
    }
    unsigned char *buf = malloc(MAX_ZONE_FILE + 1);
    size_t n = 0;
    while (buf != NULL && n <= MAX_ZONE_FILE) {
        ssize_t r = read(fd, buf + n, MAX_ZONE_FILE + 1 - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    if (buf == NULL || n > MAX_ZONE_FILE || n < 44) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Parses a TZif file (owned by the state on success). Returns 0 if it is not a valid one. */
static int
load_tzif(unsigned char *z, size_t len)
{
    if (memcmp(z, "TZif", 4) != 0) {
        return 0;
    }
    const unsigned char *h = z, *end = z + len;
    int tsize = 4;
    for (int pass = 0; pass < 2; pass++) {
        if ((size_t)(end - h) < 44) {
            return 0;
        }
        size_t isut = rd32(h + 20), isstd = rd32(h + 24), leap = rd32(h + 28), timecnt = rd32(h + 32),
               typecnt = rd32(h + 36), charcnt = rd32(h + 40);
        if (timecnt > 100000 || typecnt == 0 || typecnt > 256 || charcnt > 65536 || leap > 10000 ||
            isut > typecnt || isstd > typecnt) {
            return 0;
        }
        size_t body = timecnt * tsize + timecnt + typecnt * 6 + charcnt + leap * (tsize + 4) + isstd + isut;
        if ((size_t)(end - h - 44) < body) {
            return 0;
        }
        if (pass == 0 && z[4] >= '2') {
            h += 44 + body; /* skip the 32-bit data: the 64-bit one follows */
            tsize = 8;
            continue;
        }
        const unsigned char *p = h + 44;
        tzs.trans = p;
        tzs.tsize = tsize;
        tzs.idx = p + timecnt * tsize;
        const unsigned char *ty = tzs.idx + timecnt;
        tzs.types = malloc(typecnt * sizeof(struct ttinfo));
        tzs.abbr = malloc(charcnt + 1);
        if (tzs.types == NULL || tzs.abbr == NULL) {
            free(tzs.types);
            free(tzs.abbr);
            tzs.types = NULL;
            return 0;
        }
        for (size_t i = 0; i < typecnt; i++) {
            tzs.types[i].off = (int32_t)rd32(ty + 6 * i);
            tzs.types[i].isdst = ty[6 * i + 4];
            tzs.types[i].abbr = ty[6 * i + 5] < charcnt ? ty[6 * i + 5] : 0;
        }
        memcpy(tzs.abbr, ty + typecnt * 6, charcnt);
        tzs.abbr[charcnt] = 0;
        if (charcnt == 0) {
            for (size_t i = 0; i < typecnt; i++) {
                tzs.types[i].abbr = 0;
            }
        }
        for (size_t i = 0; i < timecnt; i++) {
            if (tzs.idx[i] >= typecnt) {
                free(tzs.types);
                free(tzs.abbr);
                tzs.types = NULL;
                return 0;
            }
        }
        tzs.timecnt = timecnt;
        tzs.typecnt = typecnt;
        tzs.charcnt = charcnt;
        tzs.zone = z;
        /* Footer (v2+): "\n" POSIX-TZ "\n", for times after the last transition. */
        const unsigned char *f = p + body;
        memset(&tzs.posix, 0, sizeof tzs.posix);
        if (tsize == 8 && f < end && *f == '\n') {
            const unsigned char *nl = memchr(f + 1, '\n', (size_t)(end - f - 1));
            if (nl != NULL && nl - f - 1 <= MAX_TZ) {
                char foot[MAX_TZ + 1];
                memcpy(foot, f + 1, (size_t)(nl - f - 1));
                foot[nl - f - 1] = 0;
                if (foot[0] != 0) {
                    (void)parse_posix(foot, &tzs.posix);
                }
            }
        }
        return 1;
    }
    return 0;
}

static void
set_utc(void)
{
    memset(&tzs.posix, 0, sizeof tzs.posix);
    tzs.posix.valid = 1;
    memcpy(tzs.posix.std, "UTC", 4);
    memcpy(tzs.posix.dst, "UTC", 4);
}

static void
do_tzset(void)
{
    const char *s = getenv("TZ");
    const char *key = s ? s : "\1";
    if (tzs.loaded && strcmp(key, tzs.key) == 0) {
        return;
    }
    free_zone();
    set_utc();
    tzs.loaded = 1;
    if (strlen(key) > MAX_TZ) {
        tzs.key[0] = 0;
        tzs.loaded = 0; /* never cached: recomputed (as UTC) each time */
        return;
    }
    strcpy(tzs.key, key);
    if (s == NULL) {
        s = "/etc/localtime";
    }
    if (*s == 0) {
        return;
    }
    if (*s != ':') {
        struct posix_tz z;
        if (parse_posix(s, &z)) {
            tzs.posix = z;
            return;
        }
    } else {
        s++;
    }
    char path[sizeof(ZONEINFO) + MAX_TZ + 1];
    if (*s == '/') {
        strcpy(path, s);
    } else {
        if (*s == 0 || strstr(s, "..") != NULL) {
            return;
        }
        strcpy(path, ZONEINFO);
        strcat(path, s);
    }
    size_t len = 0;
    unsigned char *z = read_file(path, &len);
    if (z == NULL) {
        return;
    }
    if (!load_tzif(z, len)) {
        free(z);
        set_utc();
    }
}

void
tzset(void)
{
    do_tzset();
}

/* The zone type in effect at UTC time t (TZif); -1 if the footer rule applies. */
static long
tzif_type(int64_t t)
{
    size_t n = tzs.timecnt;
    if (n == 0 || t < trans_at(0)) {
        if (n == 0 && tzs.posix.valid) {
            return -1;
        }
        for (size_t i = 0; i < tzs.typecnt; i++) {
            if (!tzs.types[i].isdst) {
                return (long)i;
            }
        }
        return 0;
    }
    if (t >= trans_at(n - 1) && tzs.posix.valid) {
        return -1;
    }
    size_t lo = 0, hi = n; /* trans_at(lo) <= t < trans_at(hi) */
    while (hi - lo > 1) {
        size_t m = lo + (hi - lo) / 2;
        if (trans_at(m) <= t) {
            lo = m;
        } else {
            hi = m;
        }
    }
    return tzs.idx[lo];
}

static void
tzif_zone(int64_t t, int *isdst, long *off, long *opp, const char **name)
{
    long i = tzif_type(t);
    if (i < 0) {
        posix_zone(&tzs.posix, t, 0, isdst, off, opp, name);
        return;
    }
    const struct ttinfo *ty = &tzs.types[i];
    *isdst = ty->isdst;
    *off = ty->off;
    *name = tzs.abbr + ty->abbr;
    if (opp) {
        *opp = ty->off;
        for (size_t k = 0; k < tzs.typecnt; k++) {
            if (tzs.types[k].isdst != ty->isdst) {
                *opp = tzs.types[k].off;
                break;
            }
        }
    }
}

void
__secs_to_zone(long long t, int local, int *isdst, long *offset, long *oppoff, const char **zonename)
{
    do_tzset();
    if (tzs.zone == NULL) {
        posix_zone(&tzs.posix, t, local, isdst, offset, oppoff, zonename);
        return;
    }
    if (!local) {
        tzif_zone(t, isdst, offset, oppoff, zonename);
        return;
    }
    /* Local time: the offset in effect at t - offset, found by two rounds from the standard offset. */
    long off = 0;
    int d;
    const char *nm;
    tzif_zone(t, &d, &off, NULL, &nm);
    tzif_zone(t - off, &d, &off, NULL, &nm);
    tzif_zone(t - off, isdst, offset, oppoff, zonename);
}

/* The zone's standard (dst = 0) or daylight-saving name, for a struct tm that carries none. */
static const char *
zone_name(int dst)
{
    if (tzs.zone != NULL) {
        if (tzs.posix.valid) {
            return dst && tzs.posix.has_dst ? tzs.posix.dst : tzs.posix.std;
        }
        const char *any = NULL;
        for (size_t i = tzs.typecnt; i > 0; i--) { /* the latest types are the current names */
            const struct ttinfo *ty = &tzs.types[i - 1];
            if (!ty->isdst == !dst) {
                return tzs.abbr + ty->abbr;
            }
            any = tzs.abbr + ty->abbr;
        }
        return any ? any : __utc;
    }
    return dst && tzs.posix.has_dst ? tzs.posix.dst : tzs.posix.std;
}

const char *
__tm_to_tzname(const struct tm *tm)
{
    const char *p = tm->__tm_zone;
    do_tzset();
    if (p == NULL) {
        /* A struct tm built field by field (CPython's time.strftime from a struct_time): like glibc, the
           zone's name for its tm_isdst. */
        return tm->tm_isdst >= 0 ? zone_name(tm->tm_isdst > 0) : "";
    }
    if (p == __utc || p == tzs.posix.std || p == tzs.posix.dst) {
        return p;
    }
    if (tzs.abbr != NULL && p >= tzs.abbr && p <= tzs.abbr + tzs.charcnt) {
        return p;
    }
    return "";
}
