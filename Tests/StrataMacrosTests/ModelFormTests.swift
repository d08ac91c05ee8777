import SwiftParser
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import XCTest

@testable import StrataMacros

/// What the expansion does with the property forms SwiftData apps write
/// (the model files in Tests/FidelityTests compile and run them).
final class ModelFormTests: XCTestCase {
    private func expand(_ source: String) -> String {
        let macros: [String: any Macro.Type] = [
            "Model": ModelMacro.self, "_PersistedProperty": PersistedPropertyMacro.self,
            "Attribute": MarkerMacro.self, "Relationship": MarkerMacro.self, "Transient": MarkerMacro.self,
            "ModelActor": ModelActorMacro.self,
        ]
        let file = Parser.parse(source: source)
        let context = BasicMacroExpansionContext(sourceFiles: [file: .init(moduleName: "App", fullFilePath: "App.swift")])
        return file.expand(macros: macros, in: context, indentationWidth: .spaces(4)).description
    }

    func testATypeFromTheInitialValueIsNeverSpelled() {
        let expanded = expand(
            """
            @Model final class Journal {
                var entries = [Entry]()
                var kind = Kind.basic
            }
            """)
        XCTAssertTrue(expanded.contains("private var _entries = [Entry]()"), expanded)
        XCTAssertTrue(expanded.contains("private var _kind = Kind.basic"), expanded)
        XCTAssertTrue(
            expanded.contains("self._entries = try reader.decode(Swift.type(of: self._entries), field: 0"), expanded)
        XCTAssertTrue(
            expanded.contains("let __value = Strata._relationshipValue(value, like: self._entries)"), expanded)
    }

    func testALetIsReadOnceAndNeverTracked() {
        let expanded = expand(
            """
            @Model final class Entry {
                let id: UUID
                var text: String
                init(text: String) { id = UUID(); self.text = text }
            }
            """)
        XCTAssertTrue(expanded.contains("self.id = try reader.decode((UUID).self, field: 0"), expanded)
        XCTAssertTrue(expanded.contains("writer.encode(self.id, field: 0"), expanded)
        XCTAssertFalse(expanded.contains("_id"), "a let has no peer and no accessors:\n\(expanded)")
        XCTAssertFalse(expanded.contains("let __id"), "a merge never reloads a let")
    }

    func testOptionalPeersKeepTheirInitialValue() {
        let expanded = expand(
            """
            @Model final class Note {
                var tags: [Tag]? = []
                var shelf: [Book]! = []
                var folder: Folder?
            }
            """)
        XCTAssertTrue(expanded.contains("private var _tags: Optional<[Tag]>"), expanded)
        XCTAssertTrue(expanded.contains("private var _shelf: Optional<[Book]>"), expanded)
        XCTAssertTrue(expanded.contains("private var _folder: Folder?"), expanded)
    }

    func testModelActorMembersTakeThePublicActorsAccess() {
        let expanded = expand("@ModelActor public actor Importer {}")
        XCTAssertTrue(expanded.contains("public nonisolated let modelExecutor"), expanded)
        XCTAssertTrue(expanded.contains("public nonisolated let modelContainer"), expanded)
        XCTAssertTrue(expanded.contains("public init(modelContainer: Strata.ModelContainer)"), expanded)
        let internalActor = expand("@ModelActor actor Importer {}")
        XCTAssertFalse(internalActor.contains("public"), internalActor)
    }
}
