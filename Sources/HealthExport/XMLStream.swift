import CLibXML2
import Foundation

/// One attribute of an element, as the parser decoded it (entities resolved).
public struct XMLAttribute: Sendable, Hashable {
    public var name: String
    public var value: String
}

/// Receives a document's elements in order, as the parser meets them.
public protocol XMLStreamHandler: AnyObject {
    /// An element opens; `line` is its line in the document.
    func startElement(_ name: String, attributes: [XMLAttribute], line: Int)
    func endElement(_ name: String)
    /// Text inside the current element, possibly in several pieces.
    func characters(_ text: UnsafeBufferPointer<UInt8>)
}

extension XMLStreamHandler {
    public func characters(_ text: UnsafeBufferPointer<UInt8>) {}
}

/// Why a document could not be read: the parser's message and the line it stopped at.
public struct XMLStreamError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable {
        /// Nothing but white space came.
        case empty
        /// The first thing that came is not the start of XML (`<`, after white space or a
        /// byte-order mark).
        case notXML
        /// The bytes ended before the document did (a truncated file).
        case endedEarly
        /// The document breaks XML's rules at ``line``.
        case malformed
    }

    public var kind: Kind
    public var message: String
    public var line: Int
    public var description: String {
        switch kind {
        case .empty: "the file is empty"
        case .notXML: "not XML: \(message)"
        case .endedEarly, .malformed: "line \(line): \(message)"
        }
    }

    public init(_ kind: Kind = .malformed, message: String, line: Int) {
        (self.kind, self.message, self.line) = (kind, message, line)
    }
}

/// A push parser over libxml2's SAX2 interface: bytes go in as they arrive (from a file or
/// a zip entry being inflated), elements come out, and nothing of the document is kept.
///
/// It never loads external entities or DTDs (no network, no files), and libxml2's limits
/// on entity expansion stay on, so a hostile document costs bounded work.
///
/// ```swift
/// let parser = XMLStreamParser(handler: reader)
/// try parser.feed(chunk)        // as many times as there are chunks
/// try parser.finish()           // a truncated document fails here
/// ```
public final class XMLStreamParser {
    private let box: HandlerBox
    private var context: xmlParserCtxtPtr?
    private var finished = false
    /// Whether anything but white space (or a byte-order mark) has come yet.
    private var begun = false

    public init(handler: any XMLStreamHandler, documentName: String = "document") {
        xmlInitParser()
        box = HandlerBox(handler)
        var sax = xmlSAXHandler()
        sax.initialized = XML_SAX2_MAGIC
        sax.startElementNs = { user, localName, _, _, _, _, attributeCount, _, attributes in
            guard let user, let localName else { return }
            let box = Unmanaged<HandlerBox>.fromOpaque(user).takeUnretainedValue()
            var decoded: [XMLAttribute] = []
            if let attributes, attributeCount > 0 {
                decoded.reserveCapacity(Int(attributeCount))
                // Five pointers per attribute: local name, prefix, URI, value start, value end.
                for index in 0..<Int(attributeCount) {
                    guard let name = attributes[index * 5], let start = attributes[index * 5 + 3], let end = attributes[index * 5 + 4] else {
                        continue
                    }
                    let value = XMLStreamParser.attributeValue(UnsafeBufferPointer(start: start, count: end - start))
                    decoded.append(XMLAttribute(name: String(cString: name), value: value))
                }
            }
            box.handler.startElement(String(cString: localName), attributes: decoded, line: box.line())
        }
        sax.endElementNs = { user, localName, _, _ in
            guard let user, let localName else { return }
            Unmanaged<HandlerBox>.fromOpaque(user).takeUnretainedValue().handler.endElement(String(cString: localName))
        }
        sax.characters = { user, text, length in
            guard let user, let text, length > 0 else { return }
            Unmanaged<HandlerBox>.fromOpaque(user).takeUnretainedValue().handler.characters(UnsafeBufferPointer(start: text, count: Int(length)))
        }
        let user = Unmanaged.passUnretained(box).toOpaque()
        context = documentName.withCString { name in xmlCreatePushParserCtxt(&sax, user, nil, 0, name) }
        if let context {
            xmlCtxtUseOptions(context, Int32(XML_PARSE_NONET.rawValue) | Int32(XML_PARSE_NOCDATA.rawValue))
            box.context = context
        }
    }

    deinit {
        if let context {
            if let document = context.pointee.myDoc { xmlFreeDoc(document) }
            xmlFreeParserCtxt(context)
        }
    }

    /// An attribute's value as the document means it. Not substituting entities (which would
    /// also expand those a document declares), libxml2 hands every `&` of a value on as
    /// `&#38;` (`&amp;` in the file, or `&#38;` itself), so each `&#38;` stands for one `&`.
    static func attributeValue(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        guard let base = bytes.baseAddress, memchr(base, 0x26, bytes.count) != nil else { return String(decoding: bytes, as: UTF8.self) }
        let escaped: [UInt8] = Array("&#38;".utf8)
        var value: [UInt8] = []
        value.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x26, index + escaped.count <= bytes.count, escaped.indices.allSatisfy({ bytes[index + $0] == escaped[$0] }) {
                value.append(0x26)
                index += escaped.count
            } else {
                value.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: value, as: UTF8.self)
    }

    /// The line the parser has reached.
    public var line: Int { box.line() }

    /// Parses the next bytes of the document.
    /// - Throws: ``XMLStreamError`` when the document is not well-formed XML; the handler has
    ///   seen every element before the fault.
    public func feed(_ bytes: UnsafeRawBufferPointer) throws {
        guard let context else { throw XMLStreamError(message: "libxml2 could not create a parser", line: 0) }
        if !begun, let first = bytes.first(where: { !Self.leadingSpace.contains($0) }) {
            begun = true
            guard Self.mayBegin(bytes) else {
                let shown = first >= 0x21 && first < 0x7F ? "'\(Character(Unicode.Scalar(first)))'" : String(format: "the byte 0x%02X", first)
                throw XMLStreamError(.notXML, message: "it begins with \(shown), not '<'", line: 1)
            }
        }
        var offset = 0
        while offset < bytes.count {
            let length = min(bytes.count - offset, 1 << 20)
            let status = xmlParseChunk(context, bytes.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self), Int32(length), 0)
            if status != 0 { throw failure(context) }
            offset += length
        }
    }

    /// Parses the next bytes of the document.
    public func feed(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try feed($0) }
    }

    /// Ends the document.
    /// - Throws: ``XMLStreamError`` when the document is incomplete (a truncated file).
    public func finish() throws {
        guard let context, !finished else { return }
        finished = true
        guard begun else { throw XMLStreamError(.empty, message: "it is empty", line: 0) }
        if xmlParseChunk(context, nil, 0, 1) != 0 || context.pointee.wellFormed == 0 { throw failure(context, atEnd: true) }
    }

    /// Whether `bytes`, the first of a file, may begin an XML document: after white space a
    /// `<`, or a byte-order mark or wide text (``beginsWithByteOrderMarkOrWideText(_:)``);
    /// true for white space alone (undecided yet).
    public static func mayBegin(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let first = bytes.first(where: { !leadingSpace.contains($0) }) else { return true }
        return first == UInt8(ascii: "<") || beginsWithByteOrderMarkOrWideText(bytes)
    }

    /// Whether `bytes` begin as a document in UTF-8 with a byte-order mark, or in UTF-16 or
    /// UTF-32 (with a mark, or a `<` of two or four bytes), which libxml2 reads.
    private static func beginsWithByteOrderMarkOrWideText(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let start = Array(bytes.prefix(4))
        let marks: [[UInt8]] = [[0xEF, 0xBB, 0xBF], [0xFE, 0xFF], [0xFF, 0xFE], [0x00, 0x3C], [0x00, 0x00, 0x00, 0x3C], [0x00, 0x00, 0xFE, 0xFF]]
        return marks.contains { start.starts(with: $0) }
    }

    /// The white space that may come before a document's first `<`.
    private static let leadingSpace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]

    /// The parser's last error, in one line, with what libxml2's words leave unsaid.
    private func failure(_ context: xmlParserCtxtPtr, atEnd: Bool = false) -> XMLStreamError {
        let kind: XMLStreamError.Kind = atEnd ? .endedEarly : .malformed
        guard let error = xmlCtxtGetLastError(context), let message = error.pointee.message else {
            return XMLStreamError(kind, message: "the document is not well-formed XML", line: box.line())
        }
        var text = String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "\n", with: " ")
        if text.hasPrefix("Entity '"), text.hasSuffix("not defined") {
            text += " (entities declared in a document's DTD are not read: an Apple Health export uses none)"
        } else if text.contains("Huge input lookup") {
            text += " (a name or value longer than 10 MB)"
        }
        return XMLStreamError(kind, message: text, line: Int(error.pointee.line))
    }
}

/// What the C callbacks reach through their user pointer.
private final class HandlerBox {
    let handler: any XMLStreamHandler
    var context: xmlParserCtxtPtr?

    init(_ handler: any XMLStreamHandler) { self.handler = handler }

    func line() -> Int {
        guard let context, let input = context.pointee.input else { return 0 }
        return Int(input.pointee.line)
    }
}
