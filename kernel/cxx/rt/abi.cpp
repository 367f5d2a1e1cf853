// kernel/cxx/rt/abi.cpp - the module's C++ support apart from exceptions:
// the type-information classes (their vtables, and g++'s objects for the
// fundamental types, emitted here because __fundamental_type_info's key
// function is defined here), matching a thrown type against a handler's,
// dynamic_cast, the standard exception classes, operator new and delete on
// kmalloc, __cxa_atexit and the global constructors and destructors.
#include "abi.hpp"

#include <new>
#include <string.h>
#include <tkcxx.h>

#include "rt.hpp"

using namespace __cxxabiv1;

// ---- std::type_info ----
namespace std
{
type_info::~type_info() {}
bool type_info::operator==(const type_info &o) const noexcept
{
    // one object per type within the module; the names otherwise, unless
    // one is local to its object ('*')
    return this == &o || (__name[0] != '*' && o.__name[0] != '*' && strcmp(__name, o.__name) == 0);
}
bool type_info::before(const type_info &o) const noexcept
{
    return strcmp(name(), o.name()) < 0;
}
bool type_info::__is_pointer_p() const
{
    return false;
}
bool type_info::__is_function_p() const
{
    return false;
}
const __class_type_info *type_info::__as_class() const
{
    return nullptr;
}
const __pbase_type_info *type_info::__as_pbase() const
{
    return nullptr;
}

exception::~exception() noexcept {}
const char *exception::what() const noexcept
{
    return "std::exception";
}
bad_cast::~bad_cast() noexcept {}
const char *bad_cast::what() const noexcept
{
    return "std::bad_cast";
}
bad_typeid::~bad_typeid() noexcept {}
const char *bad_typeid::what() const noexcept
{
    return "std::bad_typeid";
}
bad_alloc::~bad_alloc() noexcept {}
const char *bad_alloc::what() const noexcept
{
    return "std::bad_alloc";
}
const nothrow_t nothrow{};
} // namespace std

namespace __cxxabiv1
{
__fundamental_type_info::~__fundamental_type_info() {}
__array_type_info::~__array_type_info() {}
__function_type_info::~__function_type_info() {}
bool __function_type_info::__is_function_p() const
{
    return true;
}
__enum_type_info::~__enum_type_info() {}
__class_type_info::~__class_type_info() {}
const __class_type_info *__class_type_info::__as_class() const
{
    return this;
}
__si_class_type_info::~__si_class_type_info() {}
__vmi_class_type_info::~__vmi_class_type_info() {}
__pbase_type_info::~__pbase_type_info() {}
const __pbase_type_info *__pbase_type_info::__as_pbase() const
{
    return this;
}
__pointer_type_info::~__pointer_type_info() {}
bool __pointer_type_info::__is_pointer_p() const
{
    return true;
}
__pointer_to_member_type_info::~__pointer_to_member_type_info() {}

const __class_type_info *__vmi_class_type_info::__base(int i, const void *obj, const void **at,
                                                       bool *pub, bool *virt) const
{
    const __base_class_type_info &b = __base_info[i];
    long off = b.__offset_flags >> __base_class_type_info::__offset_shift;
    *virt = b.__offset_flags & __base_class_type_info::__virtual_mask;
    *pub = b.__offset_flags & __base_class_type_info::__public_mask;
    if (!obj) { // (a null pointer's classes: no addresses)
        *at = nullptr;
        return b.__base_type;
    }
    if (*virt) { // the vtable holds the virtual base's offset, at off
        const char *vtable = *static_cast<const char *const *>(obj);
        off = *reinterpret_cast<const long *>(vtable + off);
    }
    *at = static_cast<const char *>(obj) + off;
    return b.__base_type;
}

// void *__dynamic_cast(src, src_type, dst_type, hint): the ABI's entry for
// dynamic_cast<dst_type *>(src), src pointing to a src_type subobject of a
// polymorphic object.  The walk over the whole object's subobjects
// decides; a hint of 0 or more (src is a unique public non-virtual base of
// dst, at that offset) lets it look for one subobject and stop there.
extern "C" void *__dynamic_cast(const void *src, const __class_type_info *src_type,
                                const __class_type_info *dst_type, ptrdiff_t hint)
{
    const __class_type_info *whole_type;
    const void *whole = tkcxx::whole_object(src, &whole_type);
    if (hint >= 0) {
        // the compiler knows src is dst's only public base, hint bytes into
        // it: the answer is the dst there, if the object has one
        const void *at = static_cast<const char *>(src) - hint;
        bool found = false;
        auto find = [&](const __class_type_info *t, const void *a, bool) {
            found = a == at && *t == *dst_type;
            return !found;
        };
        whole_type->__walk(whole, true, find);
        if (found) return const_cast<void *>(at);
    }
    // the dst subobjects; for each, whether src's subobject is a public base of it
    tkcxx::distinct down, cross, cross_all;
    bool src_public = false; // src is a public base of the whole object
    auto each = [&](const __class_type_info *t, const void *at, bool pub) {
        if (*t == *src_type && at == src && pub) src_public = true;
        if (!(*t == *dst_type)) return true;
        cross_all.add(at);
        if (pub) cross.add(at);
        bool below = false; // src's subobject reached from this dst by a public path
        auto in_dst = [&](const __class_type_info *u, const void *uat, bool upub) {
            if (*u == *src_type && uat == src && upub) below = true;
            return !below;
        };
        t->__walk(at, true, in_dst);
        if (below) down.add(at);
        return true;
    };
    whole_type->__walk(whole, true, each);
    if (down.n == 1) return const_cast<void *>(down.at[0]);
    if (down.n == 0 && src_public && cross_all.n == 1 && cross.n == 1)
        return const_cast<void *>(cross.at[0]);
    return nullptr;
}

// dynamic_cast to a reference that fails; typeid of a null pointer
extern "C" [[noreturn]] void __cxa_bad_cast()
{
    throw std::bad_cast();
}
extern "C" [[noreturn]] void __cxa_bad_typeid()
{
    throw std::bad_typeid();
}
extern "C" [[noreturn]] void __cxa_pure_virtual()
{
    tkk_warn("tkcxx: a pure virtual function was called");
    std::terminate();
}
extern "C" [[noreturn]] void __cxa_deleted_virtual()
{
    tkk_warn("tkcxx: a deleted virtual function was called");
    std::terminate();
}

} // namespace __cxxabiv1

namespace tkcxx
{

const void *whole_object(const void *obj, const __class_type_info **type)
{
    const char *const *vtable = *static_cast<const char *const *const *>(obj);
    long offset_to_top = reinterpret_cast<const long *>(vtable)[-2];
    *type = reinterpret_cast<const __class_type_info *const *>(vtable)[-1];
    return static_cast<const char *>(obj) + offset_to_top;
}

// A public, unambiguous base of type to in the object at *obj of class
// from: exactly one subobject of that type (counting those reached only
// by private or protected paths), and it public.  A null object (a null
// pointer thrown) has no vtable to find virtual bases by: a public path
// to such a base is enough, and the pointer stays null.
static bool upcast(const __class_type_info *from, const __class_type_info *to, void **obj)
{
    distinct all, pub;
    auto each = [&](const __class_type_info *t, const void *at, bool p) {
        if (*t == *to) {
            all.add(at);
            if (p) pub.add(at);
        }
        return true;
    };
    from->__walk(*obj, true, each);
    if (!*obj) return pub.n >= 1;
    if (all.n != 1 || pub.n != 1) return false;
    *obj = const_cast<void *>(pub.at[0]);
    return true;
}

// Whether a handler of type c takes a thrown t ([except.handle] 3), as
// libsupc++'s __do_catch decides: outer has bit 0 while every pointer
// level above was const, and grows by 2 a level.  Pointers and pointers to
// members: the handler may add cv-qualifiers (below the first level only
// where every level above is const) and drop noexcept (a function pointer
// conversion), but not add it; a pointer may go to void * or, at the first
// level, to a public unambiguous base class; a pointer to member needs the
// same class.
static bool do_catch(const std::type_info *c, const std::type_info *t, void **obj, unsigned outer)
{
    if (*c == *t) return true;
    const __pbase_type_info *cp = c->__as_pbase(), *tp = t->__as_pbase();
    if (cp && tp) {
        if (c->__is_pointer_p() != t->__is_pointer_p()) return false; // pointer vs member
        if (!(outer & 1)) return false;
        const unsigned fq =
            __pbase_type_info::__transaction_safe_mask | __pbase_type_info::__noexcept_mask;
        unsigned tflags = tp->__flags, cflags = cp->__flags;
        if ((cflags & fq) & ~(tflags & fq)) return false; // noexcept added: no
        tflags &= ~(fq & ~cflags);                        // dropped: a conversion
        if (tflags & ~cflags) return false;               // a qualifier dropped
        if (!(cflags & __pbase_type_info::__const_mask)) outer &= ~1u;
        if (c->__is_pointer_p()) {
            if (outer < 2 && *cp->__pointee == typeid(void))
                return !tp->__pointee->__is_function_p();
        } else if (!(*static_cast<const __pointer_to_member_type_info *>(cp)->__context ==
                     *static_cast<const __pointer_to_member_type_info *>(tp)->__context)) {
            return false;
        }
        return do_catch(cp->__pointee, tp->__pointee, obj, outer + 2);
    }
    const __class_type_info *cc = c->__as_class(), *tc = t->__as_class();
    if (!cc || !tc || outer >= 4) return false; // (no upcast below a pointer's pointee)
    return upcast(tc, cc, obj);
}

bool catches(const std::type_info *caught, const std::type_info *thrown, void **obj)
{
    if (!caught) return true;                                         // catch (...)
    if (thrown->__is_pointer_p()) *obj = *static_cast<void **>(*obj); // the pointer's value
    if (*thrown == typeid(decltype(nullptr)) && caught->__as_pbase()) {
        // nullptr to any pointer or pointer to member: its null value
        static const long null_data_member = -1;
        static const void *const null_member_function[2] = {nullptr, nullptr};
        if (caught->__is_pointer_p())
            *obj = nullptr;
        else if (caught->__as_pbase()->__pointee->__is_function_p())
            *obj = const_cast<const void **>(null_member_function);
        else
            *obj = const_cast<long *>(&null_data_member);
        return true;
    }
    return do_catch(caught, thrown, obj, 1);
}

// ---- operator new and delete ----
long news; // objects from new not yet deleted

void *alloc(size_t n)
{
    void *p = tkk_alloc(n ? n : 1);
    if (p) news++;
    return p;
}
void release(void *p)
{
    if (!p) return;
    news--;
    tkk_free(p);
}

// ---- global constructors and destructors ----
struct atexit_entry {
    void (*fn)(void *);
    void *arg;
};
constexpr int MAX_ATEXIT = 256;
atexit_entry atexit_list[MAX_ATEXIT];
int n_atexit;

} // namespace tkcxx

void *operator new(size_t n)
{
    void *p = tkcxx::alloc(n);
    if (!p) throw std::bad_alloc();
    return p;
}
void *operator new[](size_t n)
{
    return operator new(n);
}
void *operator new(size_t n, const std::nothrow_t &) noexcept
{
    return tkcxx::alloc(n);
}
void *operator new[](size_t n, const std::nothrow_t &) noexcept
{
    return tkcxx::alloc(n);
}
void operator delete(void *p) noexcept
{
    tkcxx::release(p);
}
void operator delete[](void *p) noexcept
{
    tkcxx::release(p);
}
void operator delete(void *p, size_t) noexcept
{
    tkcxx::release(p);
}
void operator delete[](void *p, size_t) noexcept
{
    tkcxx::release(p);
}

// The module is the only "shared object": __dso_handle names it, and
// destructors registered by its constructors run at unload.
extern "C" {
void *__dso_handle = &__dso_handle;
int __cxa_atexit(void (*fn)(void *), void *arg, void *)
{
    using namespace tkcxx;
    if (n_atexit == MAX_ATEXIT) {
        tkk_warn("tkcxx: more than 256 global objects with destructors");
        return -1;
    }
    atexit_list[n_atexit++] = {fn, arg};
    return 0;
}
}

namespace tkcxx
{
// The constructors, in the order the linker put them (kcxx.lds).
extern "C" void (*__tk_ctors_start[])(void);
extern "C" void (*__tk_ctors_end[])(void);

// Each under a boundary: one that throws is reported (tkcxx_call) and the
// others still run.
void run_destructors()
{
    while (n_atexit > 0) {
        static atexit_entry e;
        e = atexit_list[--n_atexit];
        tkcxx_call(
            [](void *) {
                e.fn(e.arg);
                return 0;
            },
            nullptr);
    }
}

int run_constructors()
{
    n_atexit = 0;
    for (auto *c = __tk_ctors_start; c < __tk_ctors_end; c++) {
        auto call = [](void *f) {
            reinterpret_cast<void (*)()>(f)();
            return 0;
        };
        int r = tkcxx_call(call, reinterpret_cast<void *>(*c));
        if (r != 0) {
            tkk_print("tkcxx: a global constructor failed: the module is not loaded");
            run_destructors();
            return r;
        }
    }
    return 0;
}
} // namespace tkcxx
