# Installation and the Debian package (included by the top-level CMakeLists.txt).
#
# The same files in two layouts:
#   - `cmake --install` / `make install`: the libraries in CMAKE_INSTALL_LIBDIR
#     (lib under /usr/local or a prefix of the user's), man pages as they are;
#   - the Debian package (`make deb`, cpack): component "deb", never installed
#     otherwise, for prefix /usr with the libraries in lib/<multiarch triplet>
#     and gzipped man pages, as Debian's own packages have them.
# What is installed: libtrapkit.so and .a, libtrapkit_cxx.a, libtrapkit_eh.so,
# libtrapkit_dsm.a (with trapkit-dsm.pc),
# the headers, the CMake package, trapkit.pc, the trapkit and tksim programs
# and the man pages (man/, with a link for every name a page documents).

include(CMakePackageConfigHelpers)

# The man pages, built into man/ and deb/man/ (cmake/man.cmake).
file(GLOB TK_MAN_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/man/man[1-8]/*.[1-8])
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/man.stamp
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}/man -DOUT=${PROJECT_BINARY_DIR}/man
          -DOUT_GZ=${PROJECT_BINARY_DIR}/deb/man -P ${PROJECT_SOURCE_DIR}/cmake/man.cmake
  COMMAND ${CMAKE_COMMAND} -E touch ${PROJECT_BINARY_DIR}/man.stamp
  DEPENDS ${TK_MAN_PAGES} ${PROJECT_SOURCE_DIR}/cmake/man.cmake
  COMMENT "Man pages")
add_custom_target(trapkit_man ALL DEPENDS ${PROJECT_BINARY_DIR}/man.stamp)

write_basic_package_version_file(${PROJECT_BINARY_DIR}/trapkitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)

# tk_install_layout(LIBDIR COMPONENT): every install rule, for one layout.
function(tk_install_layout libdir component)
  if(component STREQUAL "deb")
    set(opts COMPONENT deb EXCLUDE_FROM_ALL)
    set(gen ${PROJECT_BINARY_DIR}/deb) # generated files of this layout
    set(export trapkitDebTargets)
  else()
    set(opts COMPONENT ${component})
    set(gen ${PROJECT_BINARY_DIR})
    set(export trapkitTargets)
  endif()
  set(cmakedir ${libdir}/cmake/trapkit)

  install(TARGETS trapkit trapkit_static trapkit_cxx trapkit_eh EXPORT ${export}
    LIBRARY DESTINATION ${libdir} ${opts}
    ARCHIVE DESTINATION ${libdir} ${opts})
  set(programs trapkit_cli)
  if(TARGET tksim)
    list(APPEND programs tksim)
  endif()
  install(TARGETS ${programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} ${opts})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/trapkit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    ${opts})

  # The CMake package and the pkg-config file find the prefix from their own
  # location, so an installed tree can be moved (cmake --install --prefix P,
  # dpkg -x into a scratch root).
  install(EXPORT ${export} FILE trapkitTargets.cmake NAMESPACE trapkit:: DESTINATION ${cmakedir}
    ${opts})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/trapkitConfig.cmake.in
    ${gen}/trapkitConfig.cmake INSTALL_DESTINATION ${cmakedir})
  install(FILES ${gen}/trapkitConfig.cmake ${PROJECT_BINARY_DIR}/trapkitConfigVersion.cmake
    DESTINATION ${cmakedir} ${opts})
  set(TK_PC_LIBDIR ${libdir})
  file(RELATIVE_PATH TK_PC_TO_PREFIX "/${libdir}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" TK_PC_TO_PREFIX "${TK_PC_TO_PREFIX}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/trapkit.pc.in ${gen}/trapkit.pc @ONLY)
  install(FILES ${gen}/trapkit.pc DESTINATION ${libdir}/pkgconfig ${opts})
  # the shared virtual memory (trapkit/dsm.h): a static library over
  # libtrapkit.a, for MPI programs (pkg-config trapkit-dsm)
  install(FILES $<TARGET_FILE:trapkit_dsm> DESTINATION ${libdir} ${opts})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/trapkit-dsm.pc.in ${gen}/trapkit-dsm.pc @ONLY)
  install(FILES ${gen}/trapkit-dsm.pc DESTINATION ${libdir}/pkgconfig ${opts})

  # man/ holds the pages and their links (symbolic links: installed as links)
  install(DIRECTORY ${gen}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR} ${opts})
endfunction()

tk_install_layout(${CMAKE_INSTALL_LIBDIR} Unspecified)
if(CMAKE_LIBRARY_ARCHITECTURE)
  tk_install_layout(lib/${CMAKE_LIBRARY_ARCHITECTURE} deb)
else()
  tk_install_layout(lib deb)
endif()

# The Debian package: trapkit_<version>_<arch>.deb, its dependencies computed
# by dpkg-shlibdeps (libc6, libzydis4.0, libstdc++6 for libtrapkit_eh.so ...),
# a shlibs file and the ldconfig trigger for its libraries.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME trapkit)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "hardware traps as a fast, safe building block for user programs")
set(CPACK_PACKAGE_DESCRIPTION
  "trapkit makes page-protection faults, userfaultfd events and signals a building block for
garbage collectors, language runtimes, snapshotting servers and sandboxes: regions
with fault handlers, the Appel & Li primitives (PROT1, PROTN, UNPROT, DIRTY, MAP2)
on every mechanism Linux offers, concurrent checkpointing, rollforward atomic
sequences, fast exception delivery and processor faults as C++ exceptions.
This package holds the shared and static libraries, the headers, the pkg-config
file and CMake package, the trapkit and tksim programs and the man pages.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL deb)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_PACKAGE_NAME trapkit)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(TK_DEB_MAINTAINER "trapkit maintainers <trapkit@localhost>" CACHE STRING
  "The Maintainer field of the Debian package")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TK_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# new symbols go into new version nodes (src/trapkit.map): a later 0.x
# package serves what this one's users bound
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/package)
include(CPack)
