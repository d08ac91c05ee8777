#!/usr/bin/env python3
"""Which test here covers each form the real-code census found in at least
1% of files (realcode-counts.md), or why none applies.

Writes realcode-tests.md; exits 1 when a form at or above 1% has neither a
test nor a reason. Run from the package root:
`python3 Tests/Census/realcode-tests.py` (CI checks the output is current).
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Tests in Tests/FidelityTests (each runs in the four language settings).
R = "RealCodeFormsTests.testTheChoresDataLayer"
RS = "RealCodeFormsTests.testASharedPreviewContainerAndChangeNotifications"
RM = "RealCodeFormsTests.testAnObservableMainActorListOverTheMainContext"
RT = "ChoresSwiftTesting (Swift Testing)"
RECIPE = "RecipeTests.testInferredTypesRoundTripAndQuery"
JOURNAL = "JournalTests.testLetPropertiesAndARequiredToOneRoundTrip"
CODABLE = "CodableModelTests.testCodableModelsAsToOneAndToManyTargets"
PRIVATE = "PrivateStorageTests.testPrivateStoredPropertiesBehindComputedWrappers"
ACTOR = "Xcode26FormsTests.testAModelActorFetchesReadsAndChangesModels"
PRED = "PredicateFormTests.testCommonPredicateFormsAgreeWithFoundation"
SURF = "SurfaceTests.testConfigurationInitializersAndTheirProperties"
MIGR = "RelationshipIndexTests.testAMigrationAddsAnIndexOverAToOne"
CUSTOM = "CustomStageTests.testDidMigrateFillsAddedNonOptionalAttributes"
STORES = "SeveralStoresFidelityTests.testTripsInOneStorePeopleInAnother"
CLOUD = "CloudKitStyleTests.testOptionalToManyOnBothSidesOfAManyToMany"
AUTOSAVE = "SurfaceTests.testAutosaveOnAModelActorsContext"
GAPS = "FoundationGapTests.testTheStandardDirectoriesNameTheUsersFolders"

NOT_LINUX = "n/a: a framework or type that does not exist on Linux, outside Strata's scope"
SWIFTUI = "n/a: SwiftUI (no SwiftUI on Linux; see the SwiftDataSurface article)"
LANGUAGE = "n/a: Swift itself, not SwiftData; used throughout the fidelity files"

# Form (as realcode-counts.md names it) → test or reason. Regular
# expressions match several forms at once.
COVERAGE = [
    (r"@Model \(any use\)|@Model class|stored `var x: T` \(no default\)|attribute type String", RECIPE),
    (r"final class|optional type `T\?`|init with default argument values|init with parameters, no defaults", R),
    (r"@Attribute \(any\)|@Attribute on property|@Attribute\(\.unique\)", R),
    (r"model declares its own `id` property|model conforms to Identifiable|model conforms to Hashable", R),
    (r"attribute type (Date|Int|Bool|UUID|Double)|stored `var x: T = default`", R),
    (r"non-final class|`let` stored property", JOURNAL),
    (r"relationship to-many \(`\[Model\]`\)|relationship without @Relationship|@Relationship \(any\)", R),
    (r"relationship to-one \(`Model` / `Model\?`\)|@Relationship on property|@Relationship\(inverse:\)", R),
    (r"extension of a @Model class|computed property in model|method \(func\) in model", R),
    (r"default value kind: .*", RECIPE),
    (r"@Relationship\(deleteRule: \.cascade\)", "UndoTests.testInsertAndDeleteWithCascadeBeforeASave"),
    (r"@Relationship\(deleteRule: \.nullify\)|relationship to-many optional \(`\[Model\]\?`\)", R),
    (r"non-standard attribute type .*|nested type in model|static func in model", RECIPE),
    (r"@Model nested in a type .*", MIGR),
    (r"relationship to-many non-optional with default `= \[\]`", R),
    (r"model with several inits|init\(\) without parameters|required init|@Transient on computed property", R),
    (r"attribute type Data|@Attribute\(\.externalStorage\)", R),
    (r"stored `var x = value` \(type inferred\)|array attribute `\[T\]` \(T not a model\)", RECIPE),
    (r"public/open model class|public property", PRIVATE),
    (r"init\(from decoder:\) \(Codable\)|model conforms to Codable.*|func encode\(to:\) \(Codable\)", CODABLE),
    (r"@Transient", RECIPE),
    (r"@Attribute\(originalName:\)|@Relationship without arguments", R),
    (r"#Predicate \(any\)|predicate: ==|predicate with `\$0`|#Predicate<T> \{ \} \(explicit type\)", PRED),
    (r"#Predicate \{ \} \(type inferred\)|predicate: \.contains\(x\)|predicate: && |predicate: &&", PRED),
    (r"Predicate<T> type \(stored/passed predicate\)|predicate with named parameter \(`x in`\)", R),
    (r"predicate: \.id == \(own id attribute\)|predicate: captured collection .*|predicate: relationship traversal .*", R),
    (r"predicate: < > <= >= comparison", PRED),
    (r"ModelContext type mention|context\.fetch\(|FetchDescriptor \(any\)|context\.insert\(|FetchDescriptor<", R),
    (r"mainContext", RM),
    (r"context\.save\(\)|PersistentModel protocol \(generic/any\)|generic <T: PersistentModel>", R),
    (r"context\.delete\( \(instance\)|sortBy:|SortDescriptor\(|SortDescriptor<T> type|context\.fetchCount\(", R),
    (r"SortDescriptor order: \.reverse", ACTOR),
    (r"ModelContext\( constructor|persistentModelID|PersistentIdentifier|NotificationCenter", RS),
    (r"fetchLimit", "IdentifierTests.testFetchLimitZeroMeansNoLimit"),
    (r"FetchDescriptor\( \(type inferred\)", "FoundationGapTests.testPredicatesThatEvaluateOtherPredicatesAndExpressions"),
    (r"@ModelActor|@ModelActor actor|modelExecutor|@ModelActor body uses modelContext", ACTOR),
    (r"autosaveEnabled", AUTOSAVE),
    (r"try\? context\.save\(\)|hasChanges \(any receiver\)|context\.hasChanges", RM),
    (r"context\.delete\(model:\) \(batch\)", RS),
    (r"ModelContainer type mention|ModelContainer\( \(any\)|ModelConfiguration type mention|ModelConfiguration\( \(any\)", SURF),
    (r"Schema type mention|ModelConfiguration isStoredInMemoryOnly:.*|ModelContainer\(for: schema\) schema value", RS),
    (r"fatalError\( \(e\.g\. container creation\)|static shared container/preview container|Schema\(other arguments\)", RS),
    (r"ModelContainer configurations: .*|Schema\(\[A\.self, \.\.\.\]\)|ModelConfiguration schema:", STORES),
    (r"ModelContainer\(for: A\.self\) single type|ModelContainer\(for: A\.self, B\.self, \.\.\.\) variadic types", RT),
    (r"ModelContainer migrationPlan:|VersionedSchema|typealias to a versioned model .*|versionIdentifier", MIGR),
    (r"static var models|SchemaMigrationPlan|Schema\.Version\(|MigrationStage", CUSTOM),
    (r"ModelConfiguration url:|ModelConfiguration allowsSave:|ModelConfiguration\(\"name\", \.\.\.\) positional name", SURF),
    (r"\.modelContainer\(.*", SWIFTUI),
    (r"@main App struct|import SwiftUI", SWIFTUI),
    (r"import WidgetKit / AppIntents|import UIKit|import Combine|import OSLog / os|import CoreData", NOT_LINUX),
    (r"Logger / os_log|ObservableObject / @Published|Color / UIColor / NSColor in data layer", NOT_LINUX),
    (r"UIImage / NSImage in data layer", NOT_LINUX),
    (r"LocalizedStringResource / LocalizedStringKey",
     "FoundationGapTests.testLocalizedStringResourcesDescribeTheirStringAndLocalizeToIt (Strata declares "
     "LocalizedStringResource where Linux Foundation lacks it; LocalizedStringKey is SwiftUI)"),
    (r"import Foundation|struct declaration|Result type / throws|extension declaration|do/catch|enum declaration", LANGUAGE),
    (r"protocol declaration|actor declaration|Hashable|Identifiable|Codable \(any mention\)|CodingKeys", LANGUAGE),
    (r"@available\(|#if DEBUG|#if canImport\(|print\(|KeyPath / \\\.keyPath|Sendable|@unchecked Sendable", LANGUAGE),
    (r"@Sendable closure|nonisolated|async|await|@MainActor", ACTOR),
    (r"Task \{|MainActor\.run / MainActor\.assumeIsolated|@Observable \(non-model\)", RM),
    (r"UUID\(\)|Date\(\)|\.now \(implicit Date\.now\)|Date\.now|UUID\(\)\.uuidString|Calendar", R),
    (r"JSONDecoder|JSONEncoder", RS),
    (r"FileManager \(any\)|\.appendingPathComponent / \.appending\(path:\)", GAPS),
    (r"DateFormatter / \.formatted\(|UserDefaults|DispatchQueue|import Observation", "n/a: Foundation and Dispatch on Linux provide them"),
    (r"@testable import|import XCTest", "every test target here"),
    (r"import Testing", RT),
    (r"project kind: .*|derived: .*|pbxproj .*|Package\.swift .*",
     "FidelityTests, FidelitySwift5Tests, FidelityMainActorTests, FidelityMainActorSwift5Tests (the four settings)"),
]


def main():
    rows = []
    section = None
    for line in open(os.path.join(HERE, "realcode-counts.md")):
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        match = re.match(r"\| (.+?) \| *(\d*) \| *([\d.]+) \| *(\d+) \|", line)
        if match and float(match.group(3)) >= 1.0:
            rows.append((section, match.group(1), match.group(2), match.group(3), match.group(4)))
    out = [
        "# Where each common real-code form is tested",
        "",
        "Every form that `realcode-counts.md` finds in at least 1% of the surveyed files (or, for language",
        "settings, of repositories), with the test here that uses it or why none applies. Tests are in",
        "`Tests/FidelityTests` and run in all four language settings. Regenerate with",
        "`python3 Tests/Census/realcode-tests.py`.",
        "",
    ]
    missing = []
    current = None
    for section, form, files, percent, repos in rows:
        if section != current:
            out += ["", f"## {section}", "", "| form | % | covered by |", "|---|---:|---|"]
            current = section
        covered = next((test for pattern, test in COVERAGE if re.fullmatch(pattern, form)), None)
        if covered is None:
            missing.append(form)
            covered = "MISSING"
        out.append(f"| {form} | {percent} | {covered} |")
    with open(os.path.join(HERE, "realcode-tests.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    if missing:
        for form in missing:
            print(f"no test or reason for: {form}", file=sys.stderr)
        sys.exit(1)
    print(f"{len(rows)} forms at or above 1%, each with a test or a reason")


if __name__ == "__main__":
    main()
