// kernel/cxx/rt/abi.hpp - the type-information classes of the Itanium C++
// ABI (section 2.9.5), as g++ lays out the objects it emits for each type,
// with the runtime's matching and casting on them (rt/abi.cpp).
#ifndef TKCXX_ABI_HPP
#define TKCXX_ABI_HPP
#include <stddef.h>
#include <stdint.h>
#include <typeinfo>

namespace __cxxabiv1
{

class __fundamental_type_info : public std::type_info
{
  public:
    explicit __fundamental_type_info(const char *n) : std::type_info(n) {}
    ~__fundamental_type_info() override;
};

class __array_type_info : public std::type_info
{
  public:
    explicit __array_type_info(const char *n) : std::type_info(n) {}
    ~__array_type_info() override;
};

class __function_type_info : public std::type_info
{
  public:
    explicit __function_type_info(const char *n) : std::type_info(n) {}
    ~__function_type_info() override;
    bool __is_function_p() const override;
};

class __enum_type_info : public std::type_info
{
  public:
    explicit __enum_type_info(const char *n) : std::type_info(n) {}
    ~__enum_type_info() override;
};

class __class_type_info : public std::type_info
{
  public:
    explicit __class_type_info(const char *n) : std::type_info(n) {}
    ~__class_type_info() override;
    const __class_type_info *__as_class() const override;
    // Every base-class subobject of an object of this type at obj, with
    // this type's own first: fn(type, address, public on the whole path,
    // virtual base); false from fn stops the walk (and returns false).
    template <class F> bool __walk(const void *obj, bool pub, F &fn) const;
    virtual int __nbases() const { return 0; }
    // base i: its type, its address within obj, public, virtual
    virtual const __class_type_info *__base(int, const void *, const void **, bool *, bool *) const
    {
        return nullptr;
    }
};

class __si_class_type_info : public __class_type_info
{
  public:
    const __class_type_info *__base_type;
    ~__si_class_type_info() override;
    int __nbases() const override { return 1; }
    const __class_type_info *__base(int, const void *obj, const void **at, bool *pub,
                                    bool *virt) const override
    {
        *at = obj;
        *pub = true;
        *virt = false;
        return __base_type;
    }
};

struct __base_class_type_info {
    const __class_type_info *__base_type;
    long __offset_flags;
    enum { __virtual_mask = 1, __public_mask = 2, __offset_shift = 8 };
};

class __vmi_class_type_info : public __class_type_info
{
  public:
    unsigned int __flags;
    unsigned int __base_count;
    __base_class_type_info __base_info[1];
    ~__vmi_class_type_info() override;
    int __nbases() const override { return static_cast<int>(__base_count); }
    const __class_type_info *__base(int i, const void *obj, const void **at, bool *pub,
                                    bool *virt) const override;
};

class __pbase_type_info : public std::type_info
{
  public:
    unsigned int __flags;
    const std::type_info *__pointee;
    enum {
        __const_mask = 0x1,
        __volatile_mask = 0x2,
        __restrict_mask = 0x4,
        __incomplete_mask = 0x8,
        __incomplete_class_mask = 0x10,
        __transaction_safe_mask = 0x20,
        __noexcept_mask = 0x40
    };
    ~__pbase_type_info() override;
    const __pbase_type_info *__as_pbase() const override;
};

class __pointer_type_info : public __pbase_type_info
{
  public:
    ~__pointer_type_info() override;
    bool __is_pointer_p() const override;
};

class __pointer_to_member_type_info : public __pbase_type_info
{
  public:
    const __class_type_info *__context;
    ~__pointer_to_member_type_info() override;
};

template <class F> bool __class_type_info::__walk(const void *obj, bool pub, F &fn) const
{
    if (!fn(this, obj, pub)) return false;
    for (int i = 0; i < __nbases(); i++) {
        const void *at;
        bool p, v;
        const __class_type_info *b = __base(i, obj, &at, &p, &v);
        if (b && !b->__walk(at, pub && p, fn)) return false;
    }
    return true;
}

} // namespace __cxxabiv1

namespace tkcxx
{
// The distinct addresses seen (a virtual base is reached by every path
// to it: one subobject).
struct distinct {
    const void *at[8];
    int n = 0;
    void add(const void *p)
    {
        for (int i = 0; i < n && i < 8; i++)
            if (at[i] == p) return;
        if (n < 8) at[n] = p;
        n++;
    }
};

// Whether an exception of type thrown (its object at *obj) is caught by a
// handler for type caught; on a match *obj is what the handler receives
// (the adjusted object, or for a pointer the adjusted pointer's value).
bool catches(const std::type_info *caught, const std::type_info *thrown, void **obj);
// The most derived object of a polymorphic obj, and its type.
const void *whole_object(const void *obj, const __cxxabiv1::__class_type_info **type);
} // namespace tkcxx

#endif
