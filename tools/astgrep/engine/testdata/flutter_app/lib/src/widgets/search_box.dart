import 'package:flutter/material.dart';

class SearchBox extends StatefulWidget {
  const SearchBox({super.key});

  @override
  State<SearchBox> createState() => _SearchBoxState();
}

class _SearchBoxState extends State<SearchBox> {
  TextEditingController? controller;
  FocusNode? focus;
  ScrollController? scroll;

  @override
  void initState() {
    super.initState();
    controller = TextEditingController();
    focus = FocusNode();
  }

  @override
  void dispose() {
    // if (controller != null) controller.dispose();  -- a comment, not code
    if (controller != null) controller.dispose();
    if (focus != null) {
      focus.dispose();
    }
    if (scroll != null) focus.dispose();
    if (scroll == null) scroll.dispose();
    super.dispose();
  }

  @override
  Widget build(BuildContext context) {
    const hint = 'if (controller != null) controller.dispose();';
    return TextField(controller: controller, focusNode: focus, decoration: const InputDecoration(hintText: hint));
  }
}
